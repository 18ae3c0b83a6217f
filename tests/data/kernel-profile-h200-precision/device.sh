#!/bin/bash
# Issue #29's device run (tests/data/kernel-profile-h200-precision/), one call on an nvidia-h200,
# from the root of a copy of this tree:
#   carry [".carry-cache"]; cd .carry-cache && bash tests/data/kernel-profile-h200-precision/device.sh .whl "$OUT"
# .whl holds the one py3.12 wheel the image lacks (msgspec). The 40-GEMM fill under the precision
# rule, the autotuned Triton backend filled twice, then the do_bench table: see benchmarks/kernel_profile.py
# (--precision). Every step is bounded by `timeout`; there is no bare `wait`.
set -u
WHL=$(realpath "$1"); O=$2; K=/tmp/kp
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pwsite "$WHL"/*.whl || exit 1
export PYTHONPATH="/tmp/pwsite:$PWD"
mkdir -p "$K"
nvidia-smi --query-gpu=name,driver_version,power.limit,power.max_limit,clocks.max.sm,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv | tee "$K/nvidia-smi.csv"
python3 -c "import torch, triton, msgspec, scipy, numpy, sqlite3; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'triton', triton.__version__, 'msgspec', msgspec.__version__, 'scipy', scipy.__version__, 'numpy', numpy.__version__,
'sqlite', sqlite3.sqlite_version)" | tee "$K/versions.txt"
timeout 420 python3 benchmarks/kernel_profile.py --precision "$K" --timeout-s 2.5 > "$K/device.log" 2>&1
echo "precision rc=$?"
tail -c 9000 "$K/device.log"
tar czf "$O/kp.tgz" --exclude=triton-cache --exclude=rebuilt -C "$K" .
cp "$K/bench.txt" "$O/" 2>/dev/null
ls -la "$O"
