"""`pw demo`: the whole journey on workloads/matmul-c with three bundled candidate patches.

One real improvement (loop interchange: expected verified, all six gates), one no-op (expected not
verified) and one that breaks correctness (expected rejected). The patches are applied to the
candidate workspaces exactly as an agent's edits would be.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger.errors import InputError, ToolError
from pw.app.run import RunHandle

REPO = Path(__file__).resolve().parents[2]
DEMO_WORKLOAD = REPO / "workloads" / "matmul-c"
DEMO_CANDIDATES = (
    ("loop-order", "interchange.patch", "loop interchange i-k-j: unit-stride B access"),
    ("noop", "noop.patch", "cosmetic rename, no performance change expected"),
    ("broken", "broken.patch", "faster loop with an off-by-one bound"),
)


class DemoCandidate(msgspec.Struct, frozen=True):
    id: str
    expected: str
    status: str
    speedup: float | None
    interval: list[float] | None
    gates: dict[str, bool]
    reasons: list[str]


class DemoResult(msgspec.Struct, frozen=True):
    run_dir: str
    report: str
    candidates: list[DemoCandidate]
    as_expected: bool


def apply_patch(patch: Path, workspace: Path) -> None:
    """Apply a unified diff with `patch -p1` (or `git apply` where patch is missing)."""
    if shutil.which("patch"):
        argv = ["patch", "-s", "-p1", "-i", str(patch)]
    elif shutil.which("git"):
        argv = ["git", "apply", "--unsafe-paths", str(patch)]
    else:
        raise ToolError("applying the demo patches needs `patch` or `git` on PATH")
    proc = subprocess.run(argv, cwd=workspace, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ToolError(f"{patch.name} does not apply: {proc.stderr.decode(errors='replace').strip()[:200]}")


def run_demo(runs_dir: str, progress: Callable[[str], None] = lambda _m: None) -> DemoResult:
    from pw.app.confirm import confirm
    from pw.app.evaluate import evaluate
    from pw.app.plots import draw_all
    from pw.app.prepare import prepare
    from pw.app.start import StartOptions, start

    if not DEMO_WORKLOAD.is_dir():
        raise InputError(f"{DEMO_WORKLOAD}: the bundled demo workload is missing (run pw from a repository checkout)")
    started = start(StartOptions(workload=str(DEMO_WORKLOAD), runs_dir=runs_dir), progress)
    handle = RunHandle(Path(started.run_dir))
    prepared = prepare(handle, [f"{cid}:baseline:{mech}" for cid, _, mech in DEMO_CANDIDATES])
    out = []
    for (cid, patch, _), prep in zip(DEMO_CANDIDATES, prepared):
        apply_patch(DEMO_WORKLOAD / "candidates" / patch, Path(prep.workspace))
        progress(f"evaluate {cid}")
        evaluate(handle, cid, lambda m, c=cid: progress(f"{c}: {m}"))
    winner = handle.state().candidates["loop-order"]
    if winner.verdict and winner.verdict.status != "rejected":
        confirm(handle, "loop-order", fresh=False)
    state = handle.state()
    handle.materialize(state)
    draw_all(handle)
    expected = {"loop-order": "verified", "noop": "not verified", "broken": "rejected"}
    for cid, _, _ in DEMO_CANDIDATES:
        cand = state.candidates[cid]
        v = cand.confirmation or cand.verdict
        out.append(DemoCandidate(
            id=cid, expected=expected[cid], status=v.status, speedup=v.speedup, interval=v.interval,
            gates={g.name: g.passed for g in cand.gates.gates} if cand.gates else {}, reasons=list(v.reasons),
        ))
    ok = (out[0].status == "verified" and out[1].status != "verified" and out[2].status == "rejected")
    return DemoResult(run_dir=str(handle.path), report=str(handle.path / "report.md"), candidates=out, as_expected=ok)
