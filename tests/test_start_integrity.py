"""The user's workload directory is byte-identical after `pw start`: builds and runs happen in the
run directory's copies, never in the user's tree."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("fast_preflight")

MAIN_C = r"""
#include <stdio.h>
#include "util.h"
int main(void) { printf("value %d\n", twice(21)); return 0; }
"""
UTIL_H = "static inline int twice(int x) { return 2 * x; }\n"
# Automatic dependency files: GNU make remakes an included makefile (main.d) before anything else,
# even under `make -n`, so probing this Makefile in place would write into the user's tree.
MAKEFILE = """\
prog: main.o
\tcc -o prog main.o
main.o: main.c
\tcc -O1 -c main.c
main.d: main.c
\tcc -MM main.c > main.d
-include main.d
"""


def tree_snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (hidden ones too): kind, mode, mtime and content hash."""
    out: dict[str, tuple] = {".": ("dir", os.stat(root).st_mode, os.stat(root).st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", st.st_mode, st.st_mtime_ns)
            else:
                out[rel] = ("file", st.st_mode, st.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def make_workload(root: Path, manifest: dict | None) -> Path:
    (root / "include").mkdir(parents=True)
    (root / "main.c").write_text(MAIN_C.replace('"util.h"', '"include/util.h"'))
    (root / "include" / "util.h").write_text(UTIL_H)
    (root / "Makefile").write_text(MAKEFILE)
    (root / "run.sh").write_text("#!/bin/sh\nexec ./prog\n")
    (root / "run.sh").chmod(0o755)
    (root / ".hidden-notes").write_text("do not touch\n")
    (root / "link-to-main.c").symlink_to("main.c")
    if manifest is not None:
        (root / "profileweaver.json").write_text(json.dumps(manifest))
    return root


@pytest.mark.parametrize("explicit", [False, True], ids=["inferred", "manifest"])
def test_workload_tree_is_untouched(pw_cli, tmp_path, explicit):
    manifest = {
        "version": 1, "name": "untouched", "source": {"editable": ["main.c", "include/*.h"]},
        "build": [{"argv": ["make"], "timeout_s": 60}],
        "run": {"argv": ["./run.sh"], "timeout_s": 20},
        "oracle": {"kind": "exit"},
    } if explicit else None
    wl = make_workload(tmp_path / "workload", manifest)
    before = tree_snapshot(wl)
    r = pw_cli("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile", "--json")
    assert r.code == 0, r
    assert tree_snapshot(wl) == before
    run = Path(json.loads(r.out)["run_dir"])
    # The build happened, in the run directory's copy.
    assert (run / "build" / "baseline" / "prog").is_file()
    assert (run / "build" / "baseline" / "main.d").is_file()
    if not explicit:
        assert json.loads(r.out)["inferred"] is True
        assert any("the build produced prog" in line for line in json.loads(r.out)["inference"])


def test_failed_start_leaves_the_tree_untouched(pw_cli, tmp_path):
    manifest = {
        "version": 1, "name": "untouched", "source": {"editable": ["main.c"]},
        "build": [{"argv": ["make"], "timeout_s": 60}],
        "run": {"argv": ["./prog"], "timeout_s": 20},
        "oracle": {"kind": "stdout", "reference": "expected.txt"},
    }
    wl = make_workload(tmp_path / "workload", manifest)
    (wl / "expected.txt").write_text("value 43\n")  # wrong on purpose: oracle-failed
    before = tree_snapshot(wl)
    r = pw_cli("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--no-profile")
    assert r.code == 1 and "oracle-failed" in r.err, r
    assert tree_snapshot(wl) == before


def test_runs_dir_inside_the_workload_is_not_copied(pw_cli, tmp_path):
    """`--runs-dir` under the workload (as with the default `runs/` run from inside it) must not be
    copied into the baseline, and apart from it the tree stays as it was."""
    wl = make_workload(tmp_path / "workload", None)
    before = tree_snapshot(wl)
    r = pw_cli("start", "--workload", wl, "--runs-dir", wl / "runs", "--no-profile", "--json")
    assert r.code == 0, r
    after = tree_snapshot(wl)
    assert {k: v for k, v in after.items() if k != "runs" and not k.startswith("runs/")} == {
        k: v for k, v in before.items() if k != "."
    } | {".": after["."]}
    run = Path(json.loads(r.out)["run_dir"])
    assert not (run / "baseline" / "runs").exists()
