#!/bin/bash
# One kind of run on the device machine (gate rules 19): every timed run of both arms carries CUPTI,
# each run's kernel device times kept with it, the campaign judged on the pairs. Recorded for CI to
# replay (tests/data/gpu-one-kind-h200/, tests/test_gpu_one_kind.py). One device call from the root:
#   carry [".whl", ".carry/debs"]; bash tests/data/gpu-one-kind.sh .whl .carry/debs "$OUT"
# 1. cuda-transpose: `pw start`, the tiled candidate evaluated, audited.
# 2. cuda-suite gemm and gesummv with their timer named (ROI): `pw start`, the honest rewrite, audited.
# 3. CUPTI's cost in a timed run: benchmarks/profiler_overhead.py --adapter cupti, interleaved pairs.
# Steps run under one deadline (BUDGET seconds, default 430); a step that no longer fits says so.
set -u
START=$(date +%s); DEADLINE=$((START + ${BUDGET:-430}))
left() { echo $((DEADLINE - $(date +%s))); }
fits() { if [ "$(left)" -ge "$1" ]; then return 0; fi; echo "SKIPPED $2: $(left) s left, needs $1"; return 1; }
WHL=$(realpath "$1"); DEBS=$(realpath "$2"); O=$3
C=$PWD; D=/opt
mkdir -p "$O" $D/pwsite $D/carried $D/answers
exec > >(tee "$O/log.txt") 2>&1
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 PW_CACHE_DIR=$D/pwcache PW_ANCHOR_LOG=$D/anchors.jsonl
export PATH="$D/carried/usr/bin:/usr/local/cuda/bin:$PATH"
for f in "$DEBS"/*.deb; do dpkg -x "$f" $D/carried; done
export LD_LIBRARY_PATH="$D/carried/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -m pip install -q --no-index --no-deps --no-compile --target $D/pwsite "$WHL"/*.whl || exit 1
export PYTHONPATH="$D/pwsite:$C" PATH="$D/pwsite/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm --format=csv
pw() { timeout "${T:-200}" python3 -m pw.cli "$@"; }
RUNS=$D/pwruns; A=$D/answers
run_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_dir',''))" "$1" 2>/dev/null; }
one() {  # one NAME WORKLOAD PATCH_DIR PATCH ID MECHANISM
  fits 110 "$1" || return
  echo "=== $(date +%s) $1 ($(left) s left)"
  pw start --workload "$2" --runs-dir "$RUNS/$1" --json > "$A/start-$1.json"; echo "start rc=$?"
  local run; run=$(run_of "$A/start-$1.json"); [ -n "$run" ] || return
  cat "$run/agent-brief.txt"
  pw prepare "$run" --candidate "$5:baseline:$6" > /dev/null || return
  patch -s -p1 -d "$run/candidates/$5/src/$3" < "$4" || { echo "patch failed"; return; }
  fits 60 "evaluate $1" || return
  pw evaluate "$run" "$5" --json > "$A/evaluate-$1.json"; echo "evaluate rc=$?"; tail -c 3500 "$A/evaluate-$1.json"; echo
  T=90 pw audit "$run" | tail -4
}
one transpose workloads/cuda-transpose . workloads/cuda-transpose/candidates/tiled.patch tiled \
    "coalescing: shared-memory tiled transpose"
SUITE=$D/cuda-suite-roi; rm -rf $SUITE && cp -r workloads/cuda-suite $SUITE
for k in gemm:linear-algebra/gemm gesummv:linear-algebra/gesummv; do
  python3 - "${k%%:*}" "$SUITE/${k#*:}/profileweaver.json" <<'PY'
import json, sys
k, path = sys.argv[1], sys.argv[2]
json.dump({"version": 1, "name": f"{k}-roi", "source": {"editable": [f"{k}.cu", f"{k}.cuh"]},
           "build": [{"argv": ["make"], "timeout_s": 300}], "run": {"argv": [f"./{k}.exe"], "timeout_s": 60},
           "metric": {"kind": "roi", "timer": "GPU Runtime"}, "oracle": {"kind": "stable", "rtol": 1e-6},
           "sampling": {"pairs": 5, "max_pairs": 16}}, open(path, "w"), indent=1)
PY
done
one gesummv $SUITE/linear-algebra/gesummv linear-algebra/gesummv workloads/cuda-suite/candidates/gesummv-warp-per-row.patch \
    honest "coalescing: one warp per row, lanes read consecutive elements"
one gemm $SUITE/linear-algebra/gemm linear-algebra/gemm workloads/cuda-suite/candidates/gemm-tiled.patch \
    honest "data reuse: shared-memory tiled GEMM, each loaded element reused 32 times"
fits 70 overhead && timeout 120 python3 benchmarks/profiler_overhead.py --adapter cupti --workload workloads/cuda-transpose --pairs 12 2>&1 | tail -8
echo "=== done at $(date +%s), $(left) s left"
tar czf "$O/runs.tgz" --exclude='*/build' --exclude='*/scratch' --exclude='*.exe' --exclude='*/hybrids' \
  -C $D pwruns answers
ls -la "$O"; sleep 1
