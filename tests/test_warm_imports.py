"""What an evaluation needs only after its campaign is not loaded before its build (pw.app.warm):
`pw.app.evaluate` imports without scipy.stats and the tokenizer, the warm thread loads both, and a
campaign begins only once it is done."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys, threading
import pw.app.evaluate
before = {m for m in ("scipy.stats", "bpe_openai") if m in sys.modules}
from pw.app import warm
warm.start()
warm.start()  # once per process
threads = [t for t in threading.enumerate() if t.name == "pw-warm-imports"]
warm.wait()
after = {m for m in ("scipy.stats", "bpe_openai") if m in sys.modules}
print(sorted(before), len(threads), sorted(after), warm._thread.is_alive())
"""


def test_the_evaluate_module_leaves_them_to_the_warm_thread():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[] 1 ['bpe_openai', 'scipy.stats'] False", done.stdout


def test_a_campaign_waits_for_the_warm_thread(tmp_path, monkeypatch):
    """Nothing of a campaign happens before the loading is done: here the loading is a 0.4 s sleep,
    and the campaign's first act (hashing its arms' executables, which do not exist) comes after."""
    from ledger.contract import Contract, Source, Step
    from pw.app import campaign, warm
    from pw.workload.steps import Target

    ended: list[float] = []
    sleeper = threading.Thread(target=lambda: (time.sleep(0.4), ended.append(time.monotonic())))
    monkeypatch.setattr(warm, "_thread", sleeper)
    sleeper.start()
    contract = Contract(version=1, name="t", source=Source(editable=["*.c"]), run=Step(argv=["./a"], timeout_s=5))
    gone = Target(label="baseline", src_dir=tmp_path / "no", build_dir=tmp_path / "no", files=[])
    with pytest.raises(Exception):  # noqa: B017 - whatever it raises, it raised after the wait
        campaign.run_pairs(contract, gone, gone, pairs=1, seed=1, purpose="screening", exploratory=True, host="h",
                           scratch=tmp_path / "s", tool_versions={})
    raised = time.monotonic()
    assert ended and ended[0] <= raised
