# Shared by the recording scripts (tests/data/one-kind/record.sh, tests/data/redteam-s16/record.sh):
# source it after setting OUT (the output folder); from the repository root.
#   start WORKLOAD             pw start on workloads/WORKLOAD; sets RUN and adds it to RUNS
#   prep ID MECHANISM PATCH [DIR]  pw prepare ID on the baseline, then the patch applied (in src/DIR)
#   evaluate ID...             pw evaluate each, its --json kept in OUT; a line each with its exit status
PW=.venv/bin/pw
mkdir -p "$OUT"
RUNS=()

start() {
  local log="$OUT/start-$(basename "$1").json"
  $PW start --workload "workloads/$1" --runs-dir "$OUT/runs" --json > "$log" || exit 1
  RUN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['run_dir'])" "$log")
  RUNS+=("$RUN")
}
prep() {
  $PW prepare "$RUN" --candidate "$1:baseline:$2" > /dev/null && patch -s -p1 -d "$RUN/candidates/$1/src/${4:-}" < "$3"
}
evaluate() {
  local c rc start_s
  for c in "$@"; do
    start_s=$(date +%s)
    timeout 900 $PW evaluate "$RUN" "$c" --json > "$OUT/evaluate-$(basename "$RUN")-$c.json"
    rc=$?
    echo "$(basename "$RUN") $c rc=$rc $(( $(date +%s) - start_s )) s $(uptime | sed 's/.*load/load/')"
  done
}
