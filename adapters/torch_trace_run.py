"""Run a Python script under the PyTorch profiler and write its trace (Kineto's CUPTI records).

Run as ``python3 torch_trace_run.py TRACE_OUT SCRIPT [ARGS...]``: the script runs as ``__main__``
(``runpy``) inside ``torch.profiler.profile(activities=[CPU, CUDA])``, and the Chrome-trace JSON
is exported to TRACE_OUT when it returns (also when it raises SystemExit). Kineto takes its GPU
records from CUPTI's activity API, so the kernel/memcpy/memset/runtime events in the trace carry
CUPTI's own timestamps and correlation ids; ``adapters.torch_trace`` reads them into
``ledger.gpu_activity`` records.

Standard library + torch only: this file runs in the workload's interpreter, not in ``pw``'s.
"""

import os
import runpy
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: torch_trace_run.py TRACE_OUT SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    trace_out, script = sys.argv[1], sys.argv[2]
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.argv = [script, *sys.argv[3:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python3 SCRIPT` would
    code = 0
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:  # the script's own exit status, after the trace is written
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace_out)
    return code


if __name__ == "__main__":
    sys.exit(main())
