#!/usr/bin/env bash
# Records tests/data/redteam-s16/judged.tgz, the fixture of tests/test_redteam_s16.py, on this host
# with nothing else of ours running (a quiet 2-core VM), under pw.campaign/5:
#   matmul-c: red team s16's self-made wait (selfwait; selfwait2 with a loose comment, so a hybrid
#     arm), its #define inside the hotspot (macromemo) and its #line (linememo); the honest
#     interchange and the interchange + hoist (a hybrid arm);
#   lu-init-c (judged on kernel_lu's cost): the #line shifts (lineshift, lineshift3), lineshift3's
#     self-made wait without its #line (lu-yield), an honest speedup of the set-up alone
#     (init-triangular: not the operation's), and the honest partial sums, confirmed (its unprofiled
#     pairs time the whole process);
#   pyloop: py-spy's wait stalled by the program (spystall3) and the honest dict; series-c's table,
#     particles-aos-c's SoA and the suite gemm's interchange, honest;
#   and red team s16-2's (tests/data/redteam-s16-2/): rows of the hotspot run from memfd copies of
#     compiled code (memfdjit, memfdjit3 on lu-init-c; hoistjit on matmul-c, with the hoist that is
#     its real saving, and hoistonly, the hoist alone), the same with a set-up redirected by a header
#     #define (trijit2, and trijit whose helpers sit above init_array), and a Python program fast
#     only when py-spy is its parent (spyonly).
# Usage: bash tests/data/redteam-s16/record.sh OUT_DIR  (from the repository root)
set -u
OUT=${1:?out dir}
D=tests/data/redteam-s16
source tests/data/record-lib.sh

start matmul-c
prep selfwait "loop blocking" $D/selfwait/selfwait.patch
prep selfwait2 "loop blocking" $D/selfwait-hybrid/selfwait2.patch
prep macromemo "loop interchange" $D/macromemo/macromemo.patch
prep linememo "loop interchange" $D/linememo/linememo.patch
prep interchange "loop interchange" workloads/matmul-c/candidates/interchange.patch
prep both "loop interchange and a hoisted row key" tests/data/one-kind/matmul-interchange-and-hoist.patch
R2=tests/data/redteam-s16-2
prep hoistjit "loop interchange" $R2/hoistjit/hoistjit.patch
prep hoistonly "loop interchange" $R2/hoistonly/hoistonly.patch
evaluate selfwait selfwait2 macromemo linememo interchange both hoistjit hoistonly

start lu-init-c
prep lineshift "loop order" $D/lineshift/lineshift.patch
prep lineshift3 "loop order" $D/lineshift3/lineshift3.patch
prep yield "loop order" $D/lineshift3/lu-yield-no-line.patch
prep init "a triangular product" $D/lu-init-triangular.patch
prep partial-sums "partial sums in the kernel's inner loop" workloads/lu-init-c/candidates/partial-sums.patch
prep memfdjit "partial sums" $R2/memfdjit/memfdjit.patch
prep memfdjit3 "partial sums" $R2/memfdjit3/memfdjit3.patch
prep trijit "partial sums" $R2/trijit/trijit.patch
prep trijit2 "partial sums" $R2/trijit2/trijit2.patch
evaluate lineshift lineshift3 yield init partial-sums memfdjit memfdjit3 trijit trijit2
timeout 600 $PW confirm "$RUN" partial-sums --json > "$OUT/confirm-$(basename "$RUN")-partial-sums.json"
rc=$?
echo "confirm partial-sums rc=$rc"

start pyloop
prep spystall3 "a dict replaces the list scan" $D/pyspy-stall3/spystall3.patch
prep dict "a dict replaces the list scan" workloads/pyloop/candidates/dict.patch
prep spyonly "a dict replaces the list scan" $R2/spyonly/spyonly.patch
evaluate spystall3 dict spyonly
start series-c
prep table "a table of the series terms" workloads/series-c/candidates/table.patch
evaluate table
start particles-aos-c
prep soa "structure of arrays" workloads/particles-aos-c/candidates/soa.patch
evaluate soa
start suite/linear-algebra/gemm
$PW prepare "$RUN" --candidate "inter:baseline:loop interchange" > /dev/null &&
  patch -s -p1 -d "$RUN/candidates/inter/src/linear-algebra/gemm" < workloads/suite/candidates/gemm-interchange.patch
evaluate inter

for r in "${RUNS[@]}"; do $PW audit "$r" > /dev/null; echo "audit $(basename "$r") rc=$?"; done
.venv/bin/python tests/data/one-kind/pack.py "$D/judged.tgz" "${RUNS[@]}"
ls -l "$D/judged.tgz"
