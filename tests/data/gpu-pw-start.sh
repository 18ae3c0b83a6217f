#!/bin/bash
# The whole loop on the GPU workloads, on the device machine, to record the ledgers that CI replays
# through `pw audit` (tests/data/gpu-loop-h200/). One device call from the repository root:
#   carry [".whl", ".carry/debs"]; bash tests/data/gpu-pw-start.sh .whl .carry/debs "$OUT"
# .whl: the py3.12 wheels pw needs beyond the image's; .carry/debs: Debian's bubblewrap (the sandbox;
# the image has none) and libdw1 + libelf1 (nsys's QDSTRM importer), unpacked with dpkg -x.
# It runs `pw start` on cuda-transpose (timeline discovery -> ncu diagnosis -> brief), the tiled
# candidate (expected: verified, store sectors/request 32 -> 4), and on cuda-histogram the naive
# no-atomic candidate (expected: rejected by the oracle), then the CUPTI overhead benchmark.
# Every step is bounded by `timeout`; there is no bare `wait`.
set -u
WHL=$(realpath "$1"); DEBS=$(realpath "$2"); O=$3
C=$PWD
mkdir -p "$O" /opt/pwsite /opt/carried
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 PW_CACHE_DIR=/opt/pwcache
export PATH="/opt/carried/usr/bin:/usr/local/cuda/bin:$PATH"
for f in "$DEBS"/*.deb; do dpkg -x "$f" /opt/carried; done
export PW_NSYS_LIBS=/opt/carried/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="/opt/carried/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /opt/pwsite "$WHL"/*.whl || exit 1
export PYTHONPATH="/opt/pwsite:$C"
export PATH="/opt/pwsite/bin:$PATH"
which bwrap && bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid true && echo "bwrap works"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm --format=csv
pw() { timeout "${T:-280}" python3 -m pw.cli "$@"; }
RUNS=/opt/pwruns
pw doctor --json > "$O/doctor.json"; echo "doctor rc=$?"; head -c 3000 "$O/doctor.json"; echo
# The nsys failure case: without the carried libraries its importer cannot start; doctor must say so.
PW_NSYS_LIBS= pw doctor --json > "$O/doctor-no-nsys-libs.json"; echo "doctor (no libs) rc=$?"

pw start --workload workloads/cuda-transpose --runs-dir "$RUNS" --json > "$O/start-transpose.json"
echo "start rc=$?"; tail -c 1500 "$O/start-transpose.json"; echo
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$O/start-transpose.json")
cat "$RUN/agent-brief.txt"
T=60 pw inspect "$RUN" --section ncu --group memory
T=60 pw inspect "$RUN" --section routing
pw prepare "$RUN" --candidate "tiled:baseline:coalescing: shared-memory tiled transpose"
patch -s -p1 -d "$RUN/candidates/tiled/src" < workloads/cuda-transpose/candidates/tiled.patch
pw evaluate "$RUN" tiled --json > "$O/evaluate-tiled.json"; echo "evaluate rc=$?"; tail -c 2500 "$O/evaluate-tiled.json"; echo
T=120 pw audit "$RUN"; echo "audit rc=$?"

pw start --workload workloads/cuda-histogram --runs-dir "$RUNS" --json > "$O/start-histogram.json"
echo "start rc=$?"; tail -c 800 "$O/start-histogram.json"; echo
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$O/start-histogram.json")
pw prepare "$RUN" --candidate "noatomic:baseline:drop the atomics (privatize nothing)"
patch -s -p1 -d "$RUN/candidates/noatomic/src" < workloads/cuda-histogram/candidates/noatomic.patch
pw evaluate "$RUN" noatomic --json > "$O/evaluate-noatomic.json"; echo "evaluate rc=$?"; tail -c 1500 "$O/evaluate-noatomic.json"; echo
T=120 pw audit "$RUN"; echo "audit rc=$?"

timeout 90 python3 benchmarks/gpu_overhead.py --pairs 15 2>&1 | tail -n 25
# Runs without the big binaries (rebuilt by pw when needed; audit reads the ledger and evidence).
tar czf "$O/runs.tgz" --exclude='*.o' --exclude='transpose' --exclude='histogram' -C "$(dirname $RUNS)" "$(basename $RUNS)"
ls -la "$O"
