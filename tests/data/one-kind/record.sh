#!/usr/bin/env bash
# Records tests/data/one-kind/judged.tgz, the fixture of tests/test_one_kind_cheats.py, on this host
# (run it with nothing else of ours running: "a quiet host" here is the 2-core VM left alone).
#   matmul-c: the honest interchange, the interchange + fill_matrix hoist (beyond the hotspot: a
#     hybrid arm), and three dishonest rewrites (red team s9's interrupt tell, a repeated-input tell
#     kept in the user keyring, and work moved into an existing helper paid for by a saving elsewhere);
#   red team 1's misattributions (plain and calibrated), a saving outside the hotspot, and a program
#   that skips the multiply when it thinks it is profiled (tests/data/cheats, tests/data/redteam);
#   one honest rewrite each of pyloop, series-c, particles-aos-c and lu-init-c; particles' work moved
#   after its region of interest, the suite gemm's interchange alone and with a buffered dump, and a
#   program that knows the manifest's input (red team s6).
# Usage: bash tests/data/one-kind/record.sh OUT_DIR  (from the repository root)
set -u
OUT=${1:?out dir}
D=tests/data/one-kind
source tests/data/record-lib.sh

start matmul-c
prep interchange "loop interchange" workloads/matmul-c/candidates/interchange.patch
prep both "loop interchange and a hoisted row key" $D/matmul-interchange-and-hoist.patch
prep helper "loop interchange" $D/matmul-helper-misattribution.patch
prep keyring "loop interchange" $D/matmul-repeated-input-tell.patch
prep interrupts "loop interchange" tests/data/redteam-s9/matmul-loctell.patch
copy() {  # copy ID MECHANISM FILE: the candidate's matmul.c is FILE
  $PW prepare "$RUN" --candidate "$1:baseline:$2" > /dev/null && cp "$3" "$RUN/candidates/$1/src/matmul.c"
}
prep misattr "loop interchange" tests/data/redteam/misattr.patch
prep mcal "loop interchange" tests/data/redteam/misattr-calibrated.patch
prep nonhot "loop interchange" tests/data/candidates/matmul-c/non-hotspot.patch
copy profiled "loop interchange" tests/data/cheats/matmul-c/class1-profiled-run.c
prep seedtell "loop interchange" tests/data/redteam-s6/matmul-seedtell.patch
evaluate interchange both helper keyring interrupts misattr mcal nonhot profiled seedtell

start pyloop
prep dict "a dict replaces the list scan" workloads/pyloop/candidates/dict.patch
evaluate dict
start series-c
prep table "a table of the series terms" workloads/series-c/candidates/table.patch
evaluate table
start particles-aos-c
prep soa "structure of arrays" workloads/particles-aos-c/candidates/soa.patch
prep lazy "structure of arrays" tests/data/redteam-s6/particles-lazy-roi.patch
evaluate soa lazy
start suite/linear-algebra/gemm
prep buf "loop interchange" tests/data/redteam-s6/gemm-interchange-plus-buffered-dump.patch
$PW prepare "$RUN" --candidate "inter:baseline:loop interchange" > /dev/null &&
  patch -s -p1 -d "$RUN/candidates/inter/src/linear-algebra/gemm" < workloads/suite/candidates/gemm-interchange.patch
evaluate inter buf
start lu-init-c
prep partial-sums "partial sums in the kernel's inner loop" workloads/lu-init-c/candidates/partial-sums.patch
evaluate partial-sums

for r in "${RUNS[@]}"; do $PW audit "$r" > /dev/null; echo "audit $(basename "$r") rc=$?"; done
.venv/bin/python $D/pack.py "$D/judged.tgz" "${RUNS[@]}"
ls -l "$D/judged.tgz"
