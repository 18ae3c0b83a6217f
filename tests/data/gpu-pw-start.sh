#!/bin/bash
# NOT YET RUN (device time ran out in session 3): the whole loop on the GPU workloads, to record the
# ledgers that tests should replay through `pw audit`. One device call, ~3-4 minutes:
#   copy the worktree to .carry/gpu14 (no .venv/.git), carry [".carry/gpu14", ".whl"], then
#   bash .carry/gpu14/tests/data/gpu-pw-start.sh .carry/gpu14 .whl /tmp/o2 > /tmp/o2.log 2>&1;
#   tar czf $OUT/runs.tgz -C /tmp o2 /tmp/o2.log
# It runs `pw start` on cuda-transpose (timeline discovery -> ncu diagnosis -> brief), the tiled
# candidate (expected: verified, store sectors/request 32 -> 4), and on cuda-histogram the naive
# no-atomic candidate (expected: rejected by the oracle). Every step is bounded by `timeout`;
# there is no bare `wait` (it would also wait for a process substitution and hang the call).
set -u
C=$(realpath "$1"); WHL=$(realpath "$2"); O=$3
mkdir -p "$O"
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 PW_CACHE_DIR=/tmp/pwcache
export PATH="/usr/local/cuda/bin:$PATH"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/*.whl || exit 1
export PYTHONPATH="/tmp/site:$C"
cd "$C" || exit 1
pw() { timeout 280 python3 -m pw.cli "$@"; }
pw doctor --json > "$O/doctor.json"; cat "$O/doctor.json"

pw start --workload workloads/cuda-transpose --runs-dir "$O/runs" --json > "$O/start-transpose.json"
echo "start rc=$?"; tail -c 2000 "$O/start-transpose.json"
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$O/start-transpose.json")
cat "$RUN/agent-brief.txt"
pw inspect "$RUN" --section ncu --group memory
pw prepare "$RUN" --candidate "tiled:baseline:coalescing: shared-memory tiled transpose"
patch -s -p1 -d "$RUN/candidates/tiled/src" < workloads/cuda-transpose/candidates/tiled.patch
pw evaluate "$RUN" tiled --json > "$O/evaluate-tiled.json"; echo "evaluate rc=$?"; tail -c 3000 "$O/evaluate-tiled.json"
pw audit "$RUN"; echo "audit rc=$?"

pw start --workload workloads/cuda-histogram --runs-dir "$O/runs" --json > "$O/start-histogram.json"
echo "start rc=$?"
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$O/start-histogram.json")
pw prepare "$RUN" --candidate "noatomic:baseline:drop the atomics (privatize nothing)"
patch -s -p1 -d "$RUN/candidates/noatomic/src" < workloads/cuda-histogram/candidates/noatomic.patch
pw evaluate "$RUN" noatomic --json > "$O/evaluate-noatomic.json"; echo "evaluate rc=$?"; tail -c 2000 "$O/evaluate-noatomic.json"
pw audit "$RUN"; echo "audit rc=$?"
