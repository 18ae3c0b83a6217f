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

import msgspec

from adapters import sandbox as sb
from adapters.process import Confinement

# What a campaign records in conditions["sandbox"] when nothing could contain the runs.
UNCONTAINED = "none"


@functools.lru_cache(maxsize=1)
def probe() -> sb.SandboxProbe:
    """The sandbox of this pw process (probed once: ~10 ms, and ~0.1 s more for throwaway trees)."""
    if os.environ.get("PW_NO_SANDBOX") == "1":  # how tests show the uncontained path; never a default
        return sb.SandboxProbe(sandbox=None, reasons=["PW_NO_SANDBOX=1 in the environment"])
    found = sb.probe()
    if found.sandbox is None:
        return found
    from adapters.process import probe_throwaway

    # PW_NO_THROWAWAY=1: how tests show runs checked by snapshot where overlays work; never a default.
    why = "PW_NO_THROWAWAY=1 in the environment" if os.environ.get("PW_NO_THROWAWAY") == "1" \
        else probe_throwaway(found.sandbox)
    sandbox = msgspec.structs.replace(found.sandbox, throwaway=not why, throwaway_reason=why)
    return msgspec.structs.replace(found, sandbox=sandbox)


def describe(found: sb.SandboxProbe | None = None) -> str:
    """One line for conditions and reports: 'bwrap (bubblewrap 0.8.0)' or 'none: <reasons>'. Both
    arms of a campaign run in the one sandbox of its pw process, so the line is the same for both."""
    found = found or probe()
    if found.sandbox is not None:
        return f"{found.sandbox.tool} ({found.sandbox.version or 'version unknown'})"
    return f"{UNCONTAINED}: " + "; ".join(found.reasons or ["no sandbox tool"])


def throwaway_works() -> bool:
    """Whether runs here see their tree through a throwaway overlay (else: snapshots)."""
    found = probe()
    return found.sandbox is not None and found.sandbox.throwaway


def throwaway_changes(tree: Path, changes: Path) -> Path | None:
    """``changes`` when a run of ``tree`` can be shown it through a throwaway overlay whose changes
    land there (the sandbox can overlay, overlayfs can name both paths, and ``changes``'s filesystem
    takes an upper layer: probed once per filesystem), else None (the tree is snapshotted)."""
    if not throwaway_works():
        return None
    tree, changes = tree.resolve(), changes.parent.resolve() / changes.name
    if not (sb.overlay_safe(str(tree)) and sb.overlay_safe(str(changes))):
        return None
    import tempfile

    try:
        changes.parent.mkdir(parents=True, exist_ok=True)
        device = os.stat(changes.parent).st_dev
        probed = os.stat(tempfile.gettempdir()).st_dev  # where `probe` tried one already
    except OSError:
        return None
    return changes if device == probed or _upper_works_on(device, str(changes.parent)) else None


@functools.lru_cache(maxsize=8)
def _upper_works_on(device: int, where: str) -> bool:
    from adapters.process import probe_throwaway

    sandbox = probe().sandbox
    return sandbox is not None and not probe_throwaway(sandbox, where)


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
                tools: list[Path] = (), changes: Path | None = None) -> Confinement | None:
    """The sandbox for one command of a target, or None where no sandbox can be made. ``tools``:
    directories pw wrote its own helpers to (the -g compiler wrappers), shown read-only even where
    a mask would hide them. ``changes`` (only where ``throwaway_works``): the build tree is shown
    through a throwaway overlay whose changes land there (``adapters.sandbox.Throwaway``)."""
    found = probe()
    if found.sandbox is None:
        return None
    tree = str(build_dir.resolve())
    throwaway = [sb.Throwaway(tree=tree, changes=str(changes.resolve()))] if changes is not None else []
    writable = [*([] if throwaway else [tree]), *(str(p.resolve()) for p in extra_writable)]
    readonly = search_path_in_scratch(os.environ.get("PATH", ""), hidden)
    readonly += [str(p.resolve()) for p in tools if str(p.resolve()) not in readonly]
    from adapters.process import with_own_tools

    return Confinement(sandbox=found.sandbox,
                       layout=with_own_tools(sb.Layout(writable=writable, hidden=list(hidden), cwd=str(cwd.resolve()),
                                        readonly=[p for p in readonly if p not in writable and p != tree],
                                        throwaway=throwaway)))
