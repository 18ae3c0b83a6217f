"""The environment every run of a target gets (`pw.workload.steps.base_env`)."""

from __future__ import annotations

import subprocess
import sys

from ledger.contract import Step
from pw.workload.steps import base_env


def test_a_python_program_leaves_no_bytecode_cache_in_its_tree(tmp_path):
    """An import writes __pycache__/*.pyc into the tree by default: a file one run leaves for the
    next, which the correctness gate rightly calls caching across runs (it kept the honest pyloop
    dict candidate at `proposed`). No run writes one."""
    (tmp_path / "kernel.py").write_text("def f():\n    return 42\n")
    (tmp_path / "main.py").write_text("import kernel\nprint(kernel.f())\n")
    scratch = tmp_path / "scratch"
    (scratch / "home").mkdir(parents=True)
    (scratch / "tmp").mkdir()
    env = base_env(Step(argv=[sys.executable, "main.py"]), scratch)
    r = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "42\n", r.stderr
    assert not (tmp_path / "__pycache__").exists()
    # Without it, the same run leaves the cache (the test can fail).
    del env["PYTHONDONTWRITEBYTECODE"]
    subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=env, capture_output=True, timeout=60, check=True)
    assert (tmp_path / "__pycache__").is_dir()
