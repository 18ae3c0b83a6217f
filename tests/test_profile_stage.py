"""The profile stage of `pw start`, end to end on every bundled workload (DESIGN §9, §12).

One `pw start` per workload (module-scoped, launched together so the suite stays short) and a tiny C
workload run with `perf` off PATH. Checks: the planted function is the hotspot and its range covers
its loop nest (found here by an independent scan of the source), the brief fits 320 o200k tokens and
says where, what must hold and what to run next, and routing names why every other adapter lost.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pw.agent.brief import TOKEN_BUDGET
from pw.agent.tokens import count_tokens

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "workloads"
START_TIMEOUT_S = 420

# workload -> (planted function, its file, the language routing sees). Cross-checked against README.md.
PLANTED = {
    "matmul-c": ("matmul", "matmul.c", "native"),
    "particles-aos-c": ("psys_advance", "particles.c", "native"),
    "pyloop": ("histogram", "kernel.py", "python"),
    "stencil-infer": ("sweep", "stencil.c", "native"),
}
CHEAPEST = {"native": "perf", "python": "py-spy"}  # the cheapest adapter for each language when usable


# ------------------------------------------------------------------------------------------ helpers


class Started:
    """A `pw start` launched in the background; `run_dir()` waits for it and returns the run."""

    def __init__(self, workload: Path, runs_dir: Path, env: dict[str, str] | None = None) -> None:
        self.workload = workload
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pw.cli", "start", "--workload", str(workload), "--runs-dir", str(runs_dir),
             "--json"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )
        self._run: Path | None = None

    def run_dir(self) -> Path:
        if self._run is None:
            out, err = self.proc.communicate(timeout=START_TIMEOUT_S)
            assert self.proc.returncode == 0, f"pw start {self.workload.name} exited {self.proc.returncode}: {err.decode()[-2000:]}"
            result = json.loads(out)
            assert result["status"] == "ready", result
            self._run = Path(result["run_dir"])
        return self._run

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


HAVE_CC = shutil.which("cc") is not None
HAVE_CALLGRIND = HAVE_CC and shutil.which("valgrind") is not None


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """Every bundled workload started once, and the two tiny-workload runs, all at the same time
    (each test waits on its own run)."""
    runs = {name: Started(WORKLOADS / name, tmp_path_factory.mktemp(f"runs-{name}")) for name in PLANTED}
    if HAVE_CALLGRIND:
        tmp = tmp_path_factory.mktemp("no-perf")
        env = {**os.environ, "PATH": path_without(tmp / "bin", "perf")}
        runs["tiny-no-perf"] = Started(tiny_workload(tmp / "tiny-c"), tmp / "runs", env=env)
    if HAVE_CC:
        tmp = tmp_path_factory.mktemp("deep")
        deep = tmp.joinpath(*(f"deeply-nested-directory-{i}" for i in range(12)))
        runs["tiny-deep"] = Started(tiny_workload(tmp / "tiny-c"), deep)
    yield lambda name: runs[name].run_dir()
    for run in runs.values():
        run.stop()


def ledger(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]


def only(events: list[dict], kind: str) -> dict:
    found = [e["data"] for e in events if e["type"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def doc(run: Path, name: str) -> dict:
    return json.loads((run / name).read_text())


def hotspot_target(run: Path) -> dict:
    targets = doc(run, "source-targets.json")["targets"]["targets"]
    hot = [t for t in targets if t["role"] == "hotspot"]
    assert len(hot) == 1, targets
    return hot[0]


def c_definition(path: Path, name: str) -> tuple[int, int, list[int]]:
    """(first line, last line, loop lines) of C function `name`, by brace counting on comment- and
    string-free text: independent of the tool's tree-sitter parser."""
    text = path.read_text()
    blank = lambda m: re.sub(r"[^\n]", " ", m.group())  # keeps line numbers and columns
    text = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", blank, text, flags=re.S)
    lines = text.split("\n")
    head = re.compile(rf"^[A-Za-z_][\w\s\*]*\b{re.escape(name)}\s*\(")
    start = next(i for i, line in enumerate(lines, 1) if head.match(line) and not line.rstrip().endswith(";"))
    depth, opened = 0, False
    for end in range(start, len(lines) + 1):
        code = lines[end - 1]
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth == 0:
            break
    loops = [i for i in range(start, end + 1) if re.search(r"\b(for|while)\s*\(", lines[i - 1])]
    return start, end, loops


def py_definition(path: Path, name: str) -> tuple[int, int, list[int]]:
    tree = ast.parse(path.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
    loops = [n.lineno for n in ast.walk(fn)
             if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp))]
    return fn.lineno, fn.end_lineno, sorted(loops)


def definition(path: Path, name: str) -> tuple[int, int, list[int]]:
    return py_definition(path, name) if path.suffix == ".py" else c_definition(path, name)


def assert_hotspot_is(run: Path, source: Path, name: str, file: str) -> None:
    events = ledger(run)
    selected = only(events, "HotspotSelected")
    target = hotspot_target(run)
    assert (selected["name"], selected["file"]) == (name, file), selected
    assert (target["symbol"], target["file"]) == (name, file), target
    assert target["editable"] is True
    def_start, def_end, loops = definition(source / file, name)
    assert loops, f"the independent scan found no loop in {name}"
    for where, rng in (("HotspotSelected", selected), ("source-targets hotspot", target)):
        lo, hi = rng["line_start"], rng["line_end"]
        assert all(lo <= line <= hi for line in loops), f"{where} {file}:{lo}-{hi} misses loop lines {loops}"
        assert def_start <= lo <= hi <= def_end, f"{where} {file}:{lo}-{hi} outside {name} ({def_start}-{def_end})"
    # The hotspot slice the agent reads holds every loop line, numbered as in the file.
    slice_text = (run / "source-slices" / next(
        p.name for p in (run / "source-slices").iterdir() if p.name.startswith("01-hotspot-"))).read_text()
    source_lines = (source / file).read_text().split("\n")
    for line in loops:
        assert f"{line}| {source_lines[line - 1]}".rstrip() in slice_text, (line, slice_text)


def rejected(routing_phase: dict) -> dict[str, str]:
    return {r["adapter"]: r["reason"] for r in routing_phase["rejected"]}


# ------------------------------------------------------------------------------------- workloads


@pytest.mark.parametrize("workload", sorted(PLANTED))
def test_hotspot_is_the_planted_function_and_covers_its_loop_nest(started, workload):
    name, file, _ = PLANTED[workload]
    readme = (WORKLOADS / workload / "README.md").read_text()
    planted_section = readme.split("## Planted bottleneck", 1)[1].split("\n## ", 1)[0]
    assert f"`{name}()`" in planted_section, f"README of {workload} no longer plants {name}()"
    assert_hotspot_is(started(workload), WORKLOADS / workload, name, file)


@pytest.mark.parametrize("workload", sorted(PLANTED))
def test_brief_fits_320_tokens_and_says_where_what_must_hold_and_what_next(started, workload):
    run = started(workload)
    body = (run / "agent-brief.txt").read_bytes()
    text = body.decode("utf-8")
    measured = count_tokens(text)
    assert measured <= TOKEN_BUDGET == 320, f"{workload} brief is {measured} tokens"
    assert doc(run, "cost.json")["tokens"]["agent-brief.txt"] == measured
    assert doc(run, "cost.json")["tokenizer"] == "o200k_base"
    assert doc(run, "agent-brief.json")["tokens"] == measured
    target = hotspot_target(run)
    assert f"{target['file']}:{target['line_start']}-{target['line_end']}" in text
    assert re.search(r"^Verified needs all 6 gates: correctness .*significance .*mechanism", text, re.M)
    next_line = text.splitlines()[-1]
    assert next_line.startswith(f"Next (RUN={run}): pw prepare RUN --candidate "), next_line
    assert "pw evaluate RUN" in next_line
    # Every slice the brief points at exists; so does every path it names as editable.
    for rel in re.findall(r"(\d\d-[\w.-]+\.txt)", text):
        assert (run / "source-slices" / rel).is_file(), rel
    # Every other slice emitted is counted in cost.json too.
    costs = doc(run, "cost.json")["tokens"]
    for path in (run / "source-slices").iterdir():
        assert costs[f"source-slices/{path.name}"] == count_tokens(path.read_text())


@pytest.mark.parametrize("workload", sorted(PLANTED))
def test_routing_picks_the_cheapest_usable_adapter_and_says_why_not_the_others(started, workload):
    run = started(workload)
    language = PLANTED[workload][2]
    usable = {p["name"]: p["usable"] for p in doc(run, "preflight.json")["profilers"]}
    cheapest = CHEAPEST[language]
    if not usable.get(cheapest):
        pytest.skip(f"{cheapest} is not usable on this host; the fallback test covers this case")
    phases = doc(run, "profiler-routing.json")["phases"]
    discovery = phases["discovery"]
    assert discovery["chosen"] == cheapest and discovery["reason"].startswith("cheapest usable adapter")
    why = rejected(discovery)
    assert set(why) | {cheapest} == set(usable), "every probed adapter is either chosen or rejected with a reason"
    assert all(reason.strip() for reason in why.values())
    chosen_cost = float(re.search(r"est\. ([\d.]+) s", discovery["reason"]).group(1))
    for adapter, reason in why.items():
        # "partial": a tool that only imports what it captured elsewhere (`pw import`), never routed
        assert re.match(r"(unusable|target|phase|insight|cost|partial): ", reason), (adapter, reason)
        if reason.startswith("cost: "):  # a usable, capable adapter lost on cost alone
            cost, winner, its_cost = re.match(r"cost: ([\d.]+) s > (\S+) ([\d.]+) s", reason).groups()
            assert winner == cheapest and float(cost) > float(its_cost) == chosen_cost
    if language == "python":
        assert why["perf"].startswith("target: python not in") and why["callgrind"].startswith("target:")
    else:
        assert why["py-spy"].startswith("target: native not in") and "callgrind" in why
    # Diagnosis is its own recorded decision, with its reason, even when it does not escalate.
    assert phases["diagnosis"]["reason"]
    phases_seen = [e["data"]["phase"] for e in ledger(run) if e["type"] == "RoutingDecided"]
    assert phases_seen[:2] == ["discovery", "diagnosis"] and set(phases_seen[1:]) == {"diagnosis"}  # one per climb


# ---------------------------------------------------------------------------------- perf unusable

TINY_KERNEL = """\
#include "kernel.h"

void setup(unsigned *v, int n, unsigned seed)
{
    for (int i = 0; i < n; i++)
        v[i] = seed * 2654435761u + (unsigned)i;
}

unsigned crunch(const unsigned *v, int n, int rounds)
{
    unsigned acc = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            acc = acc * 1103515245u + v[i];
            acc ^= acc >> 13;
        }
    }
    return acc;
}
"""
TINY_MAIN = """\
#include <stdio.h>
#include "kernel.h"

static unsigned data[4096];

int main(void)
{
    setup(data, 4096, 7u);
    printf("acc %u\\n", crunch(data, 4096, 2000));
    return 0;
}
"""


def tiny_workload(root: Path) -> Path:
    """A two-file C program (~0.03 s) whose planted hotspot is `crunch`: cheap even under callgrind."""
    root.mkdir()
    (root / "kernel.c").write_text(TINY_KERNEL)
    (root / "kernel.h").write_text("void setup(unsigned *v, int n, unsigned seed);\n"
                                   "unsigned crunch(const unsigned *v, int n, int rounds);\n")
    (root / "main.c").write_text(TINY_MAIN)
    (root / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "tiny-c", "source": {"editable": ["kernel.c", "kernel.h"]},
        "build": [{"argv": ["cc", "-O2", "-g", "-o", "tiny", "main.c", "kernel.c"], "timeout_s": 120}],
        "run": {"argv": ["./tiny"], "timeout_s": 60},
        "oracle": {"kind": "stdout", "reference": "expected.txt"},
    }))
    (root / "expected.txt").write_text("acc 495869103\n")
    return root


def path_without(tmp: Path, hidden: str) -> str:
    """A PATH of one folder of symlinks to every program on the current PATH except `hidden`."""
    tmp.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            target = Path(folder, name)
            if name == hidden or os.path.lexists(tmp / name):
                continue
            if target.is_file() and os.access(target, os.X_OK):
                (tmp / name).symlink_to(target)
    return str(tmp)


@pytest.mark.skipif(not HAVE_CALLGRIND, reason="needs cc and valgrind (callgrind is the fallback from perf)")
def test_without_perf_routing_falls_back_and_says_why(started):
    run = started("tiny-no-perf")  # PATH: symlinks to every program on PATH except perf
    perf_probe = next(p for p in doc(run, "preflight.json")["profilers"] if p["name"] == "perf")
    assert perf_probe["usable"] is False and "not found on PATH" in perf_probe["reason"]
    discovery = doc(run, "profiler-routing.json")["phases"]["discovery"]
    assert discovery["chosen"] not in (None, "perf")
    assert discovery["chosen"] == "callgrind"
    why = rejected(discovery)
    assert why["perf"].startswith("unusable: ") and "not found on PATH" in why["perf"]
    assert why["py-spy"].startswith("target: native not in")
    # The brief names the adapter that actually measured, and its metric.
    text = (run / "agent-brief.txt").read_text()
    assert "Hotspot (callgrind, instruction-counts): crunch kernel.c:" in text and "of instructions" in text
    assert count_tokens(text) <= TOKEN_BUDGET
    assert_hotspot_is(run, run / "baseline", "crunch", "kernel.c")
    # Callgrind's exact per-line counts already answer the line question: no second capture.
    events = ledger(run)
    assert [e["data"]["adapter"] for e in events if e["type"] == "ProfileCaptured"] == ["callgrind"]
    diagnosis = doc(run, "profiler-routing.json")["phases"]["diagnosis"]
    assert diagnosis["chosen"] is None and "exact per-line instructions" in diagnosis["reason"]


@pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")
def test_a_deep_runs_dir_still_gives_a_brief_within_budget(started):
    # Essentials take ~250 tokens; a run path of ~80 tokens used to make `pw start` die with a traceback.
    run = started("tiny-deep")
    text = (run / "agent-brief.txt").read_text()
    assert count_tokens(text) <= TOKEN_BUDGET
    # Named by where the brief lives when the path does not fit; since only the hotspot's slice is an
    # essential line (issue 13), the essentials are shorter and this path may fit as it is.
    last = text.splitlines()[-1]
    assert last.startswith(("Next (RUN=the directory holding this brief): pw prepare RUN",
                            f"Next (RUN={run}): pw prepare RUN")), last
    assert doc(run, "agent-brief.json")["numbers"]["run_dir"] == str(run)  # the numbers keep the real path
    assert only(ledger(run), "HotspotSelected")["name"] == "crunch"
