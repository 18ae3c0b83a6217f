#!/bin/bash
# How the raw GPU fixtures under tests/data/{cupti,ncu,nsys,torch}-* were recorded on the device
# machine (one call): build the CUPTI injection library, build the GPU workloads and their
# candidates, run each plain and under the library, the torch profiler, ncu (filtered to the hot
# kernel) and nsys with and without carried libdw1/libelf1. Everything lands in $O (tar'ed by the
# caller). Usage: bash gpu-capture-raw.sh REPO_COPY DEBS_DIR OUT_DIR
set -u
C=$(realpath "$1"); DEBS=$(realpath "$2"); O=$3
mkdir -p "$O"
export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1
t0=$(date +%s.%N)
el() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.4f", b-a}'; }
stamp() { echo "== $(date +%s.%N | awk -v t="$t0" '{printf "%.1f", $1-t}') s: $*"; }

stamp env
nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -2
ls -d /usr/local/cuda* /opt/nvidia/nsight-compute/* 2>&1
NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu | head -1)
NSYS=$(ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
echo "ncu=$NCU nsys=$NSYS"; $NCU --version | tail -1; $NSYS --version 2>&1 | tail -1
T=/usr/local/cuda/targets/x86_64-linux
[ -d /usr/local/cuda-13.0/targets/x86_64-linux ] && T=/usr/local/cuda-13.0/targets/x86_64-linux
ls $T/include/cupti.h $T/lib/libcupti.so* 2>&1

stamp build injection library
gcc -O2 -Wall -shared -fPIC -I$T/include -o /tmp/libpwcupti.so "$C/adapters/cupti_inject.c" \
    -L$T/lib -lcupti -Wl,-rpath,$T/lib -ldl -lpthread && echo "inject build ok"
INJ="CUDA_INJECTION64_PATH=/tmp/libpwcupti.so"

stamp build workloads
W=/tmp/w; rm -rf $W; mkdir -p $W
cp -r "$C/workloads/cuda-transpose" $W/tp; cp -r "$C/workloads/cuda-transpose" $W/tpt
cp -r "$C/workloads/cuda-histogram" $W/h; cp -r "$C/workloads/cuda-histogram" $W/hp
cp -r "$C/workloads/cuda-histogram" $W/hn
(cd $W/tpt && patch -s -p1 < candidates/tiled.patch)
(cd $W/hp && patch -s -p1 < candidates/privatized.patch)
(cd $W/hn && patch -s -p1 < candidates/noatomic.patch)
pids=""; for d in tp tpt h hp hn; do (cd $W/$d && timeout 150 make -s > build.log 2>&1 || cat build.log) & pids="$pids $!"; done; wait $pids  # never a bare wait
ls -la $W/*/transpose $W/*/histogram

stamp references and plain runs
mkdir -p $O/ref
(cd $W/tp && ./transpose 8192 8192 100 1 > $O/ref/tp-stdout.txt; ./transpose 1000 3000 3 7 > $O/ref/tp-holdout-1000-3000-7.txt
 ./transpose 4099 2050 2 42 > $O/ref/tp-holdout-4099-2050-42.txt)
(cd $W/tpt && ./transpose 8192 8192 100 1 > $O/ref/tpt-stdout.txt; ./transpose 1000 3000 3 7 > $O/ref/tpt-holdout-1000-3000-7.txt)
(cd $W/h && ./histogram 67108864 256 20 1 > $O/ref/h-stdout.txt; ./histogram 1000003 100 2 7 > $O/ref/h-holdout-1000003-100-7.txt
 ./histogram 5000000 1000 3 42 > $O/ref/h-holdout-5000000-1000-42.txt)
(cd $W/hp && ./histogram 67108864 256 20 1 > $O/ref/hp-stdout.txt)
(cd $W/hn && ./histogram 67108864 256 20 1 > $O/ref/hn-stdout.txt)
python3 "$C/workloads/torch-small-ops/main.py" 300 1 > $O/ref/to-stdout.txt
(cd $O/ref && md5sum *; cmp tp-stdout.txt tpt-stdout.txt && echo TP_SAME; cmp h-stdout.txt hp-stdout.txt && echo H_SAME; cmp h-stdout.txt hn-stdout.txt || echo HN_DIFFERS)

stamp cupti injection captures
mkdir -p $O/cupti
(cd $W/tp && env $INJ PW_CUPTI_OUT=$O/cupti/tp.jsonl ./transpose 8192 8192 20 1 > $O/cupti/tp.stdout)
(cd $W/tpt && env $INJ PW_CUPTI_OUT=$O/cupti/tpt.jsonl ./transpose 8192 8192 20 1 > $O/cupti/tpt.stdout)
(cd $W/h && env $INJ PW_CUPTI_OUT=$O/cupti/h.jsonl ./histogram 67108864 256 5 1 > $O/cupti/h.stdout)
(cd $W/hp && env $INJ PW_CUPTI_OUT=$O/cupti/hp.jsonl ./histogram 67108864 256 5 1 > $O/cupti/hp.stdout)
env $INJ PW_CUPTI_OUT=$O/cupti/to.jsonl python3 "$C/workloads/torch-small-ops/main.py" 50 1 > $O/cupti/to.stdout
cmp $O/cupti/to.stdout <(python3 "$C/workloads/torch-small-ops/main.py" 50 1) && echo TO_INJECT_SAME_OUTPUT
wc -l $O/cupti/*.jsonl; head -c 600 $O/cupti/tp.jsonl

stamp torch profiler trace
mkdir -p $O/torch
python3 "$C/adapters/torch_trace_run.py" $O/torch/to-trace.json "$C/workloads/torch-small-ops/main.py" 50 1 > $O/torch/to.stdout
ls -la $O/torch
(mkdir -p /tmp/to2 && cp -r "$C/workloads/torch-small-ops/." /tmp/to2 && cd /tmp/to2 && patch -s -p1 < candidates/cudagraph.patch &&
 python3 main.py 300 1 > $O/ref/tog-stdout.txt && cmp $O/ref/to-stdout.txt $O/ref/tog-stdout.txt && echo TOG_SAME
 env $INJ PW_CUPTI_OUT=$O/cupti/tog.jsonl python3 main.py 50 1 > /dev/null)

stamp overhead: plain vs injected, interleaved
for i in 1 2 3; do
  for mode in plain inject; do
    s=$(date +%s.%N)
    if [ $mode = plain ]; then (cd $W/tp && ./transpose 8192 8192 100 1 >/dev/null)
    else (cd $W/tp && env $INJ PW_CUPTI_OUT=/tmp/ov.jsonl ./transpose 8192 8192 100 1 >/dev/null); fi
    echo "overhead tp $mode $i $(el $s)"
  done
done
for i in 1 2; do
  for mode in plain inject; do
    s=$(date +%s.%N)
    if [ $mode = plain ]; then python3 "$C/workloads/torch-small-ops/main.py" 2000 1 >/dev/null
    else env $INJ PW_CUPTI_OUT=/tmp/ov.jsonl python3 "$C/workloads/torch-small-ops/main.py" 2000 1 >/dev/null; fi
    echo "overhead to $mode $i $(el $s)"
  done
done

stamp ncu
$NCU --list-sections > $O/ncu-sections.txt 2>&1
mkdir -p $O/ncu
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section SchedulerStats --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats --section SpeedOfLight_RooflineChart"
MET="--metrics l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum,gpu__time_duration.sum"
ncu_one() {  # name dir binary-args...
  local name=$1 dir=$2; shift 2
  local s=$(date +%s.%N)
  (cd $dir && timeout 100 $NCU --clock-control none $SECS $MET -k regex:$KREGEX -s 2 -c 1 -f -o $O/ncu/$name "$@" > $O/ncu/$name.log 2>&1)
  echo "ncu rc=$? $name capture_s $(el $s)"
  $NCU --import $O/ncu/$name.ncu-rep --csv --page raw > $O/ncu/$name-raw.csv 2> $O/ncu/$name-raw.err
  $NCU --import $O/ncu/$name.ncu-rep --csv --page details --print-units base > $O/ncu/$name-details.csv 2> $O/ncu/$name-details.err
  wc -c $O/ncu/$name-raw.csv $O/ncu/$name-details.csv; tail -3 $O/ncu/$name.log
}
KREGEX=transpose_kernel ncu_one tp $W/tp ./transpose 8192 8192 5 1
KREGEX=transpose_kernel ncu_one tpt $W/tpt ./transpose 8192 8192 5 1
KREGEX=histogram_kernel ncu_one h $W/h ./histogram 67108864 256 4 1
KREGEX=histogram_kernel ncu_one hp $W/hp ./histogram 67108864 256 4 1
NPY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python | head -1)
PYTHONPATH=$NPY python3 - "$O/ncu/tp.ncu-rep" > $O/ncu/tp-ncu_report.json 2> $O/ncu/tp-ncu_report.err <<'EOF'
import json, sys
import ncu_report
ctx = ncu_report.load_report(sys.argv[1])
rng = ctx.range_by_idx(0)
act = rng.action_by_idx(0)
out = {"kernel": act.name(), "metrics": {}}
for name in act.metric_names():
    m = act.metric_by_name(name)
    try:
        v = m.value()
    except Exception as exc:
        v = f"<{exc}>"
    out["metrics"][name] = v if isinstance(v, (int, float, str)) else str(v)
print(json.dumps(out, sort_keys=True))
EOF
echo "ncu_report rc=$?"; head -c 300 $O/ncu/tp-ncu_report.json; cat $O/ncu/tp-ncu_report.err | tail -3

stamp nsys without carried libraries
mkdir -p $O/nsys /tmp/ns1 /tmp/ns2
(cd /tmp/ns1 && timeout 180 $NSYS profile -t cuda --sample=none --cpuctxsw=none -f true -o /tmp/ns1/tp $W/tp/transpose 4096 4096 10 1 > $O/nsys/without-libs.log 2>&1; echo "nsys rc=$?" >> $O/nsys/without-libs.log)
ls -la /tmp/ns1 | tee $O/nsys/without-libs.ls
stamp nsys with carried libdw1 libelf1
mkdir -p /tmp/dbg && for f in $DEBS/*.deb; do dpkg -x $f /tmp/dbg; done
ls /tmp/dbg/usr/lib/x86_64-linux-gnu/
(export LD_LIBRARY_PATH=/tmp/dbg/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
 cd /tmp/ns2 && s=$(date +%s.%N) && timeout 180 $NSYS profile -t cuda --sample=none --cpuctxsw=none -f true -o /tmp/ns2/tp $W/tp/transpose 4096 4096 10 1 > $O/nsys/with-libs.log 2>&1; echo "nsys rc=$? wall=$(el $s)" >> $O/nsys/with-libs.log
 ls -la /tmp/ns2 | tee $O/nsys/with-libs.ls
 timeout 120 $NSYS export --type sqlite -f true -o /tmp/ns2/tp.sqlite /tmp/ns2/tp.nsys-rep >> $O/nsys/with-libs.log 2>&1; echo "export rc=$?" >> $O/nsys/with-libs.log
 cp /tmp/ns2/tp.sqlite $O/nsys/ 2>/dev/null)
tail -5 $O/nsys/*.log
python3 - $O/nsys/tp.sqlite <<'EOF'
import sqlite3, sys
try:
    db = sqlite3.connect(sys.argv[1])
    for (t,) in db.execute("select name from sqlite_master where type='table' and name like 'CUPTI%' or name like 'ENUM_CUPTI%' or name='StringIds'"):
        print(t, db.execute(f"select count(*) from {t}").fetchone()[0])
except Exception as exc:
    print("sqlite read failed:", exc)
EOF
stamp done
