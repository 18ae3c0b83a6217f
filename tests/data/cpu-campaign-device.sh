#!/bin/bash
# Issue 16's campaigns on the device machine's CPUs (16 cores, nothing else running), to record the
# ledgers CI replays (tests/data/campaigns-16core/). WORKLOAD (default series-c) and CANDIDATES
# ("id:patch:mechanism ...", patches from the workload's candidates/) choose what is judged.
# One device call from the repository root:
#   carry [".whl", ".carry/debs", ".carry/perfbundle"]
#   bash tests/data/cpu-campaign-device.sh .whl .carry/debs .carry/perfbundle/perf-bookworm.tar.xz "$OUT"
# perf-bookworm.tar.xz: Debian bookworm's perf binary and the libraries it links that the image lacks
# (from `apt-get download linux-perf` and its dependencies, unpacked with dpkg -x; libdw1 and libelf1
# come from .carry/debs). perf runs through the loader with its own library path, so nothing it
# starts inherits those libraries.
# Every step is bounded by `timeout`.
set -u
WHL=$(realpath "$1"); DEBS=$(realpath "$2"); PERFTAR=$(realpath "$3"); O=$4
C=$PWD
mkdir -p "$O" /opt/pwsite /opt/carried /opt/perfroot /opt/perfbin
export PYTHONUNBUFFERED=1 PW_CACHE_DIR=/opt/pwcache
for f in "$DEBS"/*.deb; do dpkg -x "$f" /opt/carried; done
tar xJf "$PERFTAR" -C /opt/perfroot
LIBS=/opt/perfroot/lib:/opt/carried/usr/lib/x86_64-linux-gnu:/opt/carried/lib/x86_64-linux-gnu
printf '#!/bin/sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path %s /opt/perfroot/perf "$@"\n' "$LIBS" > /opt/perfbin/perf
chmod +x /opt/perfbin/perf
export PATH="/opt/perfbin:/opt/carried/usr/bin:$PATH"
export LD_LIBRARY_PATH="/opt/carried/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /opt/pwsite "$WHL"/*.whl || exit 1
export PYTHONPATH="/opt/pwsite:$C"
export PATH="/opt/pwsite/bin:$PATH"
{ nproc; lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L3'; uptime; cat /proc/sys/kernel/perf_event_paranoid; uname -r; ldd --version | head -1; } 2>&1 | tee "$O/host.txt"
/lib64/ld-linux-x86-64.so.2 --library-path "$LIBS" --list /opt/perfroot/perf | grep "not found"
perf --version; timeout 30 perf record -q -e cpu-clock -F 999 -o /tmp/p.data -- /bin/sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; echo "perf record rc=$?"
timeout 30 perf script -i /tmp/p.data -F comm,pid,period,event,ip,sym | head -3
which addr2line bwrap make gcc
pw() { timeout "${T:-400}" python3 -m pw.cli "$@"; }
RUNS=/opt/pwruns
T=120 pw doctor --json > "$O/doctor.json"; echo "doctor rc=$?"
python3 - "$O/doctor.json" <<'PY'
import json, sys
for a in json.load(open(sys.argv[1]))["adapters"]:
    print(a["adapter"], a["usable"], a["mode"], a["reason"][:100])
PY
W=workloads/${WORKLOAD:-series-c}
if [ -n "${RUN_ARGV:-}" ]; then  # the same workload with another timed input (a JSON argv)
  rm -rf /tmp/wl && cp -r "$W" /tmp/wl && W=/tmp/wl
  python3 -c "import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['run']['argv']=json.loads(sys.argv[2]); json.dump(m, open(p,'w'), indent=2)" "$W/profileweaver.json" "$RUN_ARGV"
fi
CANDIDATES=${CANDIDATES:-"q:table-tenth:coefficient table for the first tenth of the values n:noop:rename a variable a:table:coefficient table made once"}
# The host's own noise, outside pw (for the note): the baseline and each candidate, interleaved.
python3 - "$W" $CANDIDATES <<'PY' | tee "$O/noise.txt"
import json, math, os, shutil, statistics as st, subprocess, sys, time
w, specs = sys.argv[1], [c.split(":")[:2] for c in sys.argv[2:] if c.count(":") >= 2]
argv = json.load(open(f"{w}/profileweaver.json"))["run"]["argv"]
arms = {"baseline": None, **{cid: patch for cid, patch in specs}}
for arm, patch in arms.items():
    shutil.rmtree(f"/tmp/noise/{arm}", ignore_errors=True); shutil.copytree(w, f"/tmp/noise/{arm}")
    if patch:
        subprocess.run(["patch", "-s", "-p1", "-d", f"/tmp/noise/{arm}", "-i", os.path.abspath(f"{w}/candidates/{patch}.patch")], check=True)
    subprocess.run(["make", "-s", "-C", f"/tmp/noise/{arm}"], check=True, stdout=subprocess.DEVNULL)
t = {a: [] for a in arms}
for r in range(12):
    for a in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
        t0 = time.perf_counter(); subprocess.run(argv, cwd=f"/tmp/noise/{a}", stdout=subprocess.DEVNULL); t[a].append(time.perf_counter() - t0)
for a in arms:
    d = [math.log(b / x) for b, x in zip(t["baseline"], t[a])]
    print(f"{a:9s} median {st.median(t[a]):.4f} s, CV {100 * st.stdev(math.log(x) for x in t[a]):.2f}%, "
          f"paired log ratio {100 * st.mean(d):+.2f}% (SD {100 * (st.stdev(d) if a != 'baseline' else 0):.2f}%)")
PY
pw start --workload "$W" --runs-dir "$RUNS" --json > "$O/start.json"
echo "start rc=$?"; tail -c 1200 "$O/start.json"; echo
RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$O/start.json") || exit 1
cat "$RUN/agent-brief.txt"
P=$W/candidates
# Candidate specs are split on spaces between specs: "id:patch:words joined by spaces" is re-read below.
python3 -c "import re,sys; [print(m) for m in re.findall(r'\w+:[\w-]+:.*?(?= \w+:[\w-]+:|$)', sys.argv[1])]" "$CANDIDATES" > /tmp/specs
while read -r spec; do
  IFS=: read -r cid patch what <<< "$spec"
  pw prepare "$RUN" --candidate "$cid:baseline:$what"
  patch -s -p1 -d "$RUN/candidates/$cid/src" < "$P/$patch.patch"
  pw evaluate "$RUN" "$cid" --json > "$O/evaluate-$cid.json"; echo "evaluate $cid rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('status','speedup','interval','n_pairs','stop','more_pairs','reasons')})" "$O/evaluate-$cid.json"
done < /tmp/specs
T=300 pw audit "$RUN"; echo "audit rc=$?"
tar czf "$O/runs.tgz" --exclude='*.o' --exclude='matmul' --exclude='series' --exclude='perf.data' -C "$(dirname $RUNS)" "$(basename $RUNS)"
ls -la "$O"
