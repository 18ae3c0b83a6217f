"""Which sandbox this process runs target code in, and what each target's sandbox hides.

Every execution of a target's code (build, oracle, holdout, timed and profiled runs; baseline and
candidate alike, so timing stays symmetric) goes through ``adapters.sandbox``. The probe runs once
per pw process (a real launch of ``true``); where it fails, runs are not contained, the reasons are
recorded in ``PreflightCompleted.sandbox_reasons`` and each campaign's ``conditions["sandbox"]``,
and the verdict's ceiling is ``proposed``.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from adapters import sandbox as sb
from adapters.process import Confinement

# What a campaign records in conditions["sandbox"] when nothing could contain the runs.
UNCONTAINED = "none"


@functools.lru_cache(maxsize=1)
def probe() -> sb.SandboxProbe:
    """The sandbox of this pw process (probed once: ~10 ms)."""
    if os.environ.get("PW_NO_SANDBOX") == "1":  # how tests show the uncontained path; never a default
        return sb.SandboxProbe(sandbox=None, reasons=["PW_NO_SANDBOX=1 in the environment"])
    return sb.probe()


def describe(found: sb.SandboxProbe | None = None) -> str:
    """One line for conditions and reports: 'bwrap (bubblewrap 0.8.0)' or 'none: <reasons>'."""
    found = found or probe()
    if found.sandbox is not None:
        return f"{found.sandbox.tool} ({found.sandbox.version or 'version unknown'})"
    return f"{UNCONTAINED}: " + "; ".join(found.reasons or ["no sandbox tool"])


def _needed_by_pw() -> list[str]:
    """Paths the launcher needs inside the sandbox: the interpreter and adapters/launch.py."""
    import adapters

    return [os.path.realpath(sys.executable), sys.executable, os.path.realpath(adapters.__file__)]


def hidden_dirs(run_dir: Path, workload: str | None) -> list[str]:
    """What no target may see: the directory of runs (this run's baseline, references, other
    candidates, other runs) and the user's workload directory (its reference files).

    The runs directory is hidden whole unless it holds pw itself (a runs directory at the root of
    the checkout), in which case only this run directory is.
    """
    run_dir = run_dir.resolve()
    out = []
    parent = run_dir.parent
    needed = _needed_by_pw()
    if parent != Path("/") and not any(p == str(parent) or p.startswith(str(parent) + "/") for p in needed):
        out.append(str(parent))
    else:
        out.append(str(run_dir))
    if workload:
        wl = Path(workload).resolve()
        if wl.is_dir() and wl != Path("/") and not any(p.startswith(str(wl) + "/") for p in needed):
            out.append(str(wl))
    return out


def search_path_in_scratch(path: str, hidden: list[str]) -> list[str]:
    """PATH entries that the sandbox's fresh scratch tmpfs would hide; never one inside a hidden
    directory (that would show part of what must stay hidden)."""
    out = []
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        under = lambda root, p=real: p == root or p.startswith(root.rstrip("/") + "/")  # noqa: E731
        if any(under(s) for s in sb.SCRATCH_DIRS) and not any(under(h) for h in hidden) and real not in out:
            out.append(real)
    return out


def confinement(build_dir: Path, hidden: list[str], cwd: Path, extra_writable: list[Path] = (),
                tools: list[Path] = ()) -> Confinement | None:
    """The sandbox for one command of a target, or None where no sandbox can be made. ``tools``:
    directories pw wrote its own helpers to (the -g compiler wrappers), shown read-only even where
    a mask would hide them."""
    found = probe()
    if found.sandbox is None:
        return None
    writable = [str(build_dir.resolve()), *(str(p.resolve()) for p in extra_writable)]
    readonly = search_path_in_scratch(os.environ.get("PATH", ""), hidden)
    readonly += [str(p.resolve()) for p in tools if str(p.resolve()) not in readonly]
    from adapters.process import with_own_tools

    return Confinement(sandbox=found.sandbox,
                       layout=with_own_tools(sb.Layout(writable=writable, hidden=list(hidden), cwd=str(cwd.resolve()),
                                        readonly=[p for p in readonly if p not in writable])))
