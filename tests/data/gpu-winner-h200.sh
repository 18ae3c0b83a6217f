#!/bin/bash
# Winner confirmation end to end on the device machine (issue #30), recorded for CI to replay
# (tests/data/gpu-winner-h200/, tests/test_gpu_winner_confirmation.py). One device call from the root:
#   carry [".whl", ".carry/debs"]; bash tests/data/gpu-winner-h200.sh .whl .carry/debs "$OUT"
# .whl and .carry/debs as in tests/data/gpu-pw-start.sh (pw's wheels beyond the image's; bubblewrap,
# libdw1 and libelf1 unpacked with dpkg -x).
# cuda-transpose with `sampling.mode: winner-confirmation` and `profiling.cadence: every-candidate`,
# `pw start --iterations 2`, then two correct candidates screened with one exploratory pair each:
# `tiled` (workloads/cuda-transpose/candidates/tiled.patch) and `unpadded` (the same tiling without the
# +1 shared-memory column: bank conflicts; tests/data/gpu-winner-h200/unpadded.patch). The second
# evaluate spends the budget and confirms the best one-pair estimate by itself: its campaign, and
# Nsight Compute on that candidate only. Then status, report, audit; the run goes back as runs.tgz.
# Every step is bounded by `timeout`; there is no bare `wait`.
set -u
WHL=$(realpath "$1"); DEBS=$(realpath "$2"); O=$3
C=$PWD; D=/opt
mkdir -p "$O" $D/pwsite $D/carried $D/answers
exec > >(tee "$O/log.txt") 2>&1
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 PW_CACHE_DIR=$D/pwcache
export PATH="$D/carried/usr/bin:/usr/local/cuda/bin:$PATH"
for f in "$DEBS"/*.deb; do dpkg -x "$f" $D/carried; done
export PW_NSYS_LIBS=$D/carried/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$D/carried/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -m pip install -q --no-index --no-deps --no-compile --target $D/pwsite "$WHL"/*.whl || exit 1
export PYTHONPATH="$D/pwsite:$C" PATH="$D/pwsite/bin:$PATH"
which bwrap && bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid true && echo "bwrap works"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm --format=csv
pw() { timeout "${T:-200}" python3 -m pw.cli "$@"; }
A=$D/answers; RUNS=$D/pwruns; W=$D/workload/cuda-transpose
rm -rf $D/workload && mkdir -p $D/workload && cp -r workloads/cuda-transpose $W
python3 - "$W/profileweaver.json" <<'PY'
import json, sys
path = sys.argv[1]
m = json.load(open(path))
m["sampling"] = {"mode": "winner-confirmation"}
m["profiling"] = {"cadence": "every-candidate"}
json.dump(m, open(path, "w"), indent=1)
PY
cat "$W/profileweaver.json"; echo
echo "=== $(date +%s) start"
T=280 pw start --workload $W --runs-dir $RUNS --iterations 2 --json > $A/start.json; echo "start rc=$?"
tail -c 1200 $A/start.json; echo
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('run_dir',''))" $A/start.json)
[ -n "$RUN" ] || { echo "no run"; cp $A/*.json "$O/"; exit 1; }
cat "$RUN/agent-brief.txt"
pw prepare "$RUN" --candidate "tiled:baseline:coalescing: shared-memory tiled transpose" \
    --candidate "unpadded:baseline:coalescing: shared-memory tiled transpose, no padding column" || exit 1
patch -s -p1 -d "$RUN/candidates/tiled/src" < workloads/cuda-transpose/candidates/tiled.patch || exit 1
patch -s -p1 -d "$RUN/candidates/unpadded/src" < tests/data/gpu-winner-h200/unpadded.patch || exit 1
echo "=== $(date +%s) evaluate tiled"
pw evaluate "$RUN" tiled --json > $A/evaluate-tiled.json; echo "evaluate rc=$?"; tail -c 2500 $A/evaluate-tiled.json; echo
T=60 pw status "$RUN"
echo "=== $(date +%s) evaluate unpadded (spends the budget: confirms the best one-pair estimate)"
T=320 pw evaluate "$RUN" unpadded --json > $A/evaluate-unpadded.json; echo "evaluate rc=$?"
python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get('screening'), indent=1)[:4000])" $A/evaluate-unpadded.json
echo "=== $(date +%s) status, report, audit"
T=60 pw status "$RUN" --json > $A/status.json; echo "status rc=$?"
T=60 pw status "$RUN"
T=120 pw report "$RUN" --json > $A/report.json; echo "report rc=$?"
T=120 pw audit "$RUN" | tee $A/audit.txt | tail -6
python3 - "$RUN/ledger.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    t, d = e.get("type"), e.get("data", {})
    if t in ("TimingRecorded", "ProfileCaptured", "VerdictReached", "WinnerConfirmed", "UnprofiledCompared"):
        keep = {k: d.get(k) for k in ("purpose", "targets", "exploratory", "adapter", "target", "id", "status",
                                     "speedup", "interval") if k in d}
        print(e.get("seq"), t, json.dumps(keep)[:200])
PY
echo "=== done at $(date +%s)"
cp $A/evaluate-unpadded.json $A/status.json "$O/" 2>/dev/null  # the rest travel in runs.tgz (answers/)
tar czf "$O/runs.tgz" --exclude='*/build' --exclude='*/scratch' --exclude='*.o' --exclude='transpose' \
  --exclude='*/hybrids' -C $D pwruns answers
ls -la "$O"; sleep 1
