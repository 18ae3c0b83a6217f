#!/usr/bin/env bash
# Records the one-kind-of-run fixtures of tests/test_one_kind_cheats.py: one matmul-c run, the
# honest interchange, the honest interchange + fill_matrix hoist (the patch reaches beyond the
# hotspot: a hybrid arm), and three dishonest rewrites (the interrupt tell of red team s9, a
# repeated-input tell kept in the user keyring, and work moved into an existing helper paid for by
# a saving elsewhere). Usage: bash tests/data/one-kind/record.sh OUT_DIR  (from the repository root)
set -u
OUT=${1:?out dir}
PW=.venv/bin/pw
mkdir -p "$OUT"
$PW start --workload workloads/matmul-c --runs-dir "$OUT/runs" --json > "$OUT/start.json" || exit 1
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$OUT/start.json")
D=tests/data/one-kind
prep() { $PW prepare "$RUN" --candidate "$1:baseline:$2" > /dev/null && patch -s -p1 -d "$RUN/candidates/$1/src" < "$3"; }
prep interchange "loop interchange" workloads/matmul-c/candidates/interchange.patch
prep both "loop interchange and a hoisted row key" $D/matmul-interchange-and-hoist.patch
prep helper "loop interchange" $D/matmul-helper-misattribution.patch
prep keyring "loop interchange" $D/matmul-repeated-input-tell.patch
prep interrupts "loop interchange" tests/data/redteam-s9/matmul-loctell.patch
for c in interchange both helper keyring interrupts; do
  timeout 600 $PW evaluate "$RUN" $c --json > "$OUT/evaluate-$c.json"; echo "$c rc=$?"
done
$PW audit "$RUN"; echo "audit rc=$?"
echo "$RUN"
