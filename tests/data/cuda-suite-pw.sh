#!/bin/bash
# workloads/cuda-suite on the device machine as a new user meets it, recorded for CI to replay
# (tests/data/cuda-suite-h200/, tests/test_cuda_suite_replay.py). One device call from the root of a
# copy of the repository (a carry folder of the lead's checkout, say):
#   carry [".carry-NAME"]; cd .carry-NAME && bash tests/data/cuda-suite-pw.sh WHEELS DEBS "$OUT"
# WHEELS: the py3.12 wheels pw needs beyond the image's (tests/data/gpu-pw-start.sh lists how);
# DEBS: Debian's bubblewrap (the sandbox; the image has none), libdw1 + libelf1 (nsys's importer).
#
# 1. `pw start` with NO manifest on each kernel (gemm, gesummv, conv2d): the inferred oracle sets the
#    timer lines aside, the brief names the kernel with file and lines, its device share and host share.
# 2. The wrong candidate of each kernel, evaluated in that run: rejected by the inferred oracle.
# 3. A copy of the suite where each kernel's profileweaver.json names its timer
#    ("metric": {"kind": "roi", "timer": "GPU Runtime"}), `pw start` again, and the honest candidate
#    (tiled or coalesced) evaluated: verified or not, with the counter the mechanism names.
# Steps run in priority order under one deadline (BUDGET seconds, default 400): a step that no longer
# fits is skipped and says so. Every command is bounded by `timeout`; there is no bare `wait`.
# A rehearsal off the device (no GPU: a stand-in nvcc on PATH, no profile stage) sets
# DEVROOT=/tmp/somewhere NO_INSTALL=1 START_FLAGS=--no-profile PYTHON=.venv/bin/python.
set -u
START=$(date +%s)
DEADLINE=$((START + ${BUDGET:-400}))
left() { echo $((DEADLINE - $(date +%s))); }
fits() { if [ "$(left)" -ge "$1" ]; then return 0; fi; echo "SKIPPED $2: $(left) s left, needs $1"; return 1; }
WHL=$(realpath "$1"); DEBS=$(realpath "$2"); O=$3
C=$PWD
D=${DEVROOT:-/opt}
PY=${PYTHON:-python3}
mkdir -p "$O" "$D/pwsite" "$D/carried" "$D/answers"
exec > >(tee "$O/log.txt") 2>&1
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 PW_CACHE_DIR=$D/pwcache
if [ -z "${NO_INSTALL:-}" ]; then
  export PATH="$D/carried/usr/bin:/usr/local/cuda/bin:$PATH"
  for f in "$DEBS"/*.deb; do dpkg -x "$f" "$D/carried"; done
  export PW_NSYS_LIBS=$D/carried/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH="$D/carried/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$D/pwsite" "$WHL"/*.whl || exit 1
  export PYTHONPATH="$D/pwsite:$C"
  export PATH="$D/pwsite/bin:$PATH"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
nvcc --version | tail -1
pw() { timeout "${T:-150}" $PY -m pw.cli "$@"; }
A=$D/answers
RUNS=$D/pwruns
SUITE=$C/workloads/cuda-suite
declare -A DIR=([gemm]=linear-algebra/gemm [gesummv]=linear-algebra/gesummv [conv2d]=stencils/conv2d)
declare -A HONEST=([gemm]="gemm-tiled|data reuse: shared-memory tiled GEMM, each loaded element reused 32 times"
                   [gesummv]="gesummv-warp-per-row|coalescing: one warp per row, lanes read consecutive elements"
                   [conv2d]="conv2d-coalesced|coalescing: consecutive threads take consecutive columns")
declare -A WRONG=([gemm]="gemm-tiled-skips-last-tile|data reuse: shared-memory tiled GEMM"
                  [gesummv]="gesummv-warp-per-row-drops-B|coalescing: one warp per row"
                  [conv2d]="conv2d-coalesced-transposed-filter|coalescing: consecutive threads take consecutive columns")
declare -A RUN ROI
run_of() { $PY -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_dir',''))" "$1" 2>/dev/null; }

start() {  # start NAME WORKLOAD_DIR TAG: prints the run directory (the rest goes to the log)
  {
    echo "=== $(date +%s) pw start $3 $1 ($(left) s left)"
    pw start --workload "$2" --runs-dir "$RUNS/$3" ${START_FLAGS:-} --json > "$A/start-$3-$1.json"; echo "start rc=$?"
    tail -c 2500 "$A/start-$3-$1.json"; echo
  } >&2
  local run; run=$(run_of "$A/start-$3-$1.json")
  [ -n "$run" ] && cat "$run/agent-brief.txt" >&2
  echo "$run"
}

evaluate() {  # evaluate NAME RUN_DIR "PATCH|MECHANISM" TAG
  local patch=${3%%|*} mech=${3#*|} id=$4
  echo "=== $(date +%s) evaluate $1 $id ($patch; $(left) s left)"
  pw prepare "$2" --candidate "$id:baseline:$mech" > /dev/null || { echo "prepare failed"; return; }
  patch -s -p1 -d "$2/candidates/$id/src/${DIR[$1]}" < "$SUITE/candidates/$patch.patch" || { echo "patch failed"; return; }
  pw evaluate "$2" "$id" --json > "$A/evaluate-$1-$id.json"; echo "evaluate rc=$?"
  tail -c 3000 "$A/evaluate-$1-$id.json"; echo
}

# 1. No manifest, every kernel.
for k in gemm gesummv conv2d; do
  fits 60 "start $k" || continue
  RUN[$k]=$(start "$k" "$SUITE/${DIR[$k]}" plain)
done
# No -arch: the machine code is sm_75's, so the driver JIT-compiles the PTX, into pw's cache per target.
cuobjdump --list-elf "$RUNS"/plain/*gemm*/build/baseline/linear-algebra/gemm/gemm.exe 2>&1 | head -3
du -sh "$RUNS"/plain/*/build/.cuda-jit/* 2>/dev/null | head -3

# The copy that names the timer: the manifest a user writes after `pw start` said how.
rm -rf "$D/cuda-suite-roi" && cp -r "$SUITE" "$D/cuda-suite-roi"
for k in gemm gesummv conv2d; do
  $PY - "$k" "$D/cuda-suite-roi/${DIR[$k]}/profileweaver.json" <<'EOF'
import json, sys
k, path = sys.argv[1], sys.argv[2]
json.dump({"version": 1, "name": f"{k}-roi", "source": {"editable": [f"{k}.cu", f"{k}.cuh"]},
           "build": [{"argv": ["make"], "timeout_s": 300}], "run": {"argv": [f"./{k}.exe"], "timeout_s": 60},
           "metric": {"kind": "roi", "timer": "GPU Runtime"}, "oracle": {"kind": "stable", "rtol": 1e-6},
           "sampling": {"pairs": 5, "max_pairs": 12}}, open(path, "w"), indent=1)
EOF
done

# 2-3, in priority order: the coalesced rewrite most likely verified first, the wrong ones (cheap) next.
roi() {  # roi NAME: start with the timer named, then the honest candidate
  fits 100 "roi $1" || return
  ROI[$1]=$(start "$1" "$D/cuda-suite-roi/${DIR[$1]}" roi)
  [ -n "${ROI[$1]}" ] && fits 50 "honest $1" && evaluate "$1" "${ROI[$1]}" "${HONEST[$1]}" honest
}
wrong() { [ -n "${RUN[$1]:-}" ] && fits 25 "wrong $1" && evaluate "$1" "${RUN[$1]}" "${WRONG[$1]}" wrong; }
roi gesummv
wrong conv2d
roi gemm
wrong gemm
wrong gesummv
roi conv2d

for r in "$RUNS"/*/*/; do
  fits 20 "audit $r" && T=60 pw audit "$r" | tail -3
done
echo "=== done at $(date +%s), $(left) s left"
# The runs without the big binaries and scratch (audit reads the ledger and evidence; pw rebuilds).
tar czf "$O/cuda-suite-runs.tgz" --exclude='*/build' --exclude='*/scratch' --exclude='*.exe' \
  -C "$D" pwruns answers
ls -la "$O"
sleep 1  # let tee write the end of the log
