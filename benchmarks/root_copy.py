"""Measure workload root discovery and the copy of the discovered root, on a tree of 5,000 files.

    .venv/bin/python benchmarks/root_copy.py [--files 5000] [--repeat 3]

Builds a suite-shaped project in a temporary directory: a shared `config.mk` and `utilities/`,
and kernel directories of ~2 KB C sources and headers whose generated Makefiles include
`../../config.mk`, up to `--files` source files; plus a `.git/` of 500 objects and one `.o` per
kernel, which the copy must skip. Then, as `pw start` does for one kernel: discover the root
(`pw.workload.root.discover_root`), list its source files, hash them (the recorded source digest)
and copy them. Each phase is the best of `--repeat`. Ends with `key=value` lines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pw.workload import workspace  # noqa: E402
from pw.workload.root import discover_root  # noqa: E402

MAKEFILE = """include ../../config.mk
{name}: {name}.c {name}.h
\t${{CC}} -o {name} {name}.c ${{CFLAGS}} -I. -I../../utilities ../../utilities/common.c -lm
"""


def make_tree(root: Path, n_files: int) -> Path:
    (root / "utilities").mkdir(parents=True)
    (root / "config.mk").write_text("CC=gcc\nCFLAGS=-O2\n")
    (root / "utilities" / "common.c").write_text("int common;\n")
    (root / "utilities" / "common.h").write_text("extern int common;\n")
    body = "/* filler */\n" + "static double v[16];\n" * 100
    made, k = 3, 0
    first = None
    while made < n_files:
        d = root / f"cat{k % 10}" / f"kernel{k}"
        d.mkdir(parents=True)
        name = f"kernel{k}"
        (d / "Makefile").write_text(MAKEFILE.format(name=name))
        (d / f"{name}.c").write_text(body)
        (d / f"{name}.h").write_text(body)
        (d / f"{name}.o").write_bytes(b"\x7fELF" + b"\0" * 2000)  # a build output: skipped
        made += 3
        first = first or d
        k += 1
    git = root / ".git" / "objects"
    git.mkdir(parents=True)
    for i in range(500):
        (git / f"{i:04x}").write_bytes(b"x" * 1000)
    return first


def best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pw-bench-root-") as tmp:
        tree = Path(tmp) / "suite"
        kernel = make_tree(tree, args.files)
        t_disc, decision = best(lambda: discover_root(kernel), args.repeat)
        assert Path(decision.root) == tree.resolve(), decision
        t_list, files = best(lambda: workspace.source_files(Path(decision.root)), args.repeat)
        t_hash, _ = best(lambda: workspace.tree_digest(Path(decision.root), files), args.repeat)
        n = [0]

        def copy():
            n[0] += 1
            workspace.copy_files(Path(decision.root), Path(tmp) / f"copy{n[0]}", files)

        t_copy, _ = best(copy, args.repeat)
    total = t_disc + t_list + t_hash + t_copy
    print(f"{'phase':<28} {'seconds':>8}")
    for label, t in (("discover root", t_disc), (f"list {len(files)} source files", t_list),
                     ("hash them", t_hash), ("copy them", t_copy), ("total", total)):
        print(f"{label:<28} {t:>8.3f}")
    print(f"files_copied={len(files)}")
    print(f"discover_s={t_disc:.4f}")
    print(f"list_s={t_list:.3f}")
    print(f"hash_s={t_hash:.3f}")
    print(f"copy_s={t_copy:.3f}")
    print(f"root_discovery_and_copy_s={total:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
