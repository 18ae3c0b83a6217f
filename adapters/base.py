"""The adapter protocol: what every profiler adapter declares and the three verbs it exposes.

An adapter is one module per external tool (perf, callgrind, py-spy; later ncu, CUPTI, nsys, ...):

- ``spec``       static declaration: what it measures, at which granularity, for which phases and
                 targets, and what it costs (``AdapterSpec``). Routing reads only this and ``probe``.
- ``probe()``    a real, tiny run of the tool on this machine -> ``Usability`` (never just ``which``).
- ``capture()``  the only verb that runs the workload; writes raw artifacts under ``out_dir``.
- ``normalize()`` pure: artifact bytes in, ``ledger.profile.Profile`` out (no files, no environment).

GPU adapters fit the same shape: their ``granularity`` lists "kernel"/"timeline", ``measures`` lists
GPU metric ids, ``targets`` lists "cuda", and normalize emits operations of kind "kernel".
"""

from __future__ import annotations

import abc
import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from adapters.process import Confinement, run_process
from ledger.errors import ToolError
from ledger.profile import Profile

Phase = Literal["discovery", "diagnosis"]
PHASES: tuple[str, ...] = ("discovery", "diagnosis")

CAPTURE_META = "capture.json"  # artifact role every capture writes: tool version + options used


class CaptureError(ToolError):
    """A capture (or the tool behind it) failed; the message is one line saying what and why."""


class AdapterSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Static declaration of an adapter (the registry is the list of these).

    Cost model: a capture of a program that runs ``runtime_s`` natively is expected to take
    ``overhead_factor * runtime_s + setup_s`` seconds, plus a rebuild when ``needs_rebuild``.
    ``partial`` adapters only import pre-captured artifacts; with ``can_reprofile`` False they can never
    pass the mechanism gate alone.
    """

    name: str
    tool: str
    measures: list[str]
    granularity: list[str]
    phases: list[Phase]
    targets: list[str]
    can_reprofile: bool
    partial: bool
    overhead_factor: float
    setup_s: float
    needs_rebuild: bool = False
    cost_note: str = ""
    # Gate name -> why this adapter's evidence can never pass it (a partial adapter that only imports
    # pre-captured artifacts cannot reprofile, so "mechanism" is always here). Empty: no declared limit.
    gate_limits: dict[str, str] = {}

    @property
    def ceiling(self) -> str:
        """The best status a verdict resting on this adapter's evidence alone can reach."""
        return "proposed" if (self.partial or not self.can_reprofile or self.gate_limits) else "verified"

    def cost_s(self, runtime_s: float, build_s: float = 0.0) -> float:
        """Expected seconds to capture a program whose native run takes ``runtime_s``."""
        return self.overhead_factor * runtime_s + self.setup_s + (build_s if self.needs_rebuild else 0.0)


class Usability(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Outcome of ``probe()``: can this machine run the adapter, and in which mode."""

    usable: bool
    reason: str
    version: str = ""
    mode: str = ""
    notes: list[str] = []


class CaptureRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What to run and where to put the evidence. ``env`` is laid over the current environment."""

    argv: list[str]
    cwd: str
    out_dir: str
    label: str = "baseline"
    env: dict[str, str] = {}
    timeout_s: float = 600.0
    # An argv prefix that runs the tool, and with it the program, inside a sandbox
    # (adapters.sandbox): the profiler is inside, so its samples are the program's alone, and
    # the program sees what a timed run sees.
    wrap: list[str] = []
    # Launched like a timed run (``launch``): the program runs under pw's launcher, with exactly
    # ``launch_env`` (a timed run's environment), in ``confine`` (a timed run's sandbox; None: no
    # sandbox here). A profiler that can sample from outside (perf) wraps sandbox and launcher, so
    # the program's parent is the launcher and the profiler is invisible from inside;
    # ``tool_confine`` is the sandbox for a profiler that must run inside (its output directory
    # writable). The launcher's report (``Capture.program``) says how long the program ran.
    launch: bool = False
    launch_env: dict[str, str] = {}
    confine: Confinement | None = None
    tool_confine: Confinement | None = None


class RunWrap(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How a profiler joins a timed run (one kind of run: every timed run is a profiled run).

    ``outer``: an argv prefix around the sandbox and the launcher (perf samples from outside, so the
    program's parent is the launcher and nothing inside shows a profiler); ``attach``: the same from
    outside, started on the program itself (py-spy); ``env``:
    variables added to the program's environment (an injection library, CUPTI); ``writable``:
    directories the sandbox lets the program's side write (where that library writes)."""

    outer: list[str] = []
    # Put before ``outer`` only when the run is sandboxed (a fresh /proc of its own hides it from the
    # program): a shortcut for the profiler's start-up that a program outside a sandbox could see
    # (adapters/kernel_map.py).
    outer_when_confined: list[str] = []
    # A profiler started outside on the program's host process id (``{pid}``) once pw's launcher has
    # started it (``adapters.attach``), its own output in ``log``: py-spy, which must read the program.
    attach: list[str] = []
    env: dict[str, str] = {}
    writable: list[str] = []
    # Where the profiler writes what it says itself (never into the program's streams); what it said
    # (``log_said``: its first error line) is quoted when the run fails ("": no such file).
    log: str = ""


class ProgramRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What pw's launcher reported about the profiled program (what it reports for a timed run)."""

    wall_s: float
    user_s: float
    sys_s: float
    returncode: int
    leftover_processes: list[str] = []
    scratch_files: list[str] = []


class Capture(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Result of ``capture()``: raw artifact paths by role, and how they were made."""

    adapter: str
    label: str
    artifacts: dict[str, str]
    wall_s: float
    tool_version: str
    commands: list[list[str]]
    # Whether the adapter ran the program under pw's launcher as asked (``CaptureRequest.launch``;
    # profilers that must be inside the sandbox do not), and the launcher's report on it (None: not
    # launched, or the report never came).
    launched: bool = False
    program: ProgramRun | None = None


class ToolRun(msgspec.Struct, frozen=True):
    """What ``run_tool`` returns: ``returncode`` follows subprocess (minus the signal that ended it)."""

    returncode: int
    wall_s: float
    stdout: bytes
    stderr: bytes
    program: ProgramRun | None = None  # with ``launcher``: the launcher's report, when it came


def run_tool(argv: Sequence[str], *, timeout_s: float, cwd: str | None = None,
             env: Mapping[str, str] | None = None, stdout_path: str | None = None,
             wrap: Sequence[str] = (), launcher: bool = False, confine: Confinement | None = None,
             outer: Sequence[str] = ()) -> ToolRun:
    """Run a tool via ``adapters.process.run_process``; raise CaptureError on timeout or launch failure.

    ``env`` is laid over the current environment. ``stdout`` goes to ``stdout_path`` when given (large
    outputs), else is returned; stderr is returned. Both pass through files, not pipes.

    With ``launcher`` argv runs under pw's launcher (``run_process(own_peak_rss=True)``) with
    exactly ``env`` (not laid over ours), in ``confine`` when given, inside ``outer`` (a profiler
    that wraps sandbox and launcher); ``ToolRun.program`` is then the launcher's report.
    """
    with tempfile.TemporaryDirectory(prefix="pw-tool-") as tmp:
        out = Path(stdout_path) if stdout_path else Path(tmp, "stdout")
        if launcher:
            r = run_process(list(argv), cwd=cwd, env=dict(env or {}), timeout_s=timeout_s, stdout_path=out,
                            stderr_path=Path(tmp, "stderr"), own_peak_rss=True, confine=confine, outer=outer)
        else:
            r = run_process([*wrap, *argv], cwd=cwd, env={**os.environ, **(env or {})}, timeout_s=timeout_s,
                            stdout_path=out, stderr_path=Path(tmp, "stderr"))
        if r.launch_error:
            raise CaptureError(f"cannot start {r.launch_error}")
        if r.timed_out:
            raise CaptureError(f"{posixpath.basename(argv[0])} timed out after {timeout_s:g} s "
                               f"(process group killed): {' '.join(argv)}")
        stdout = b"" if stdout_path else out.read_bytes()
        program = ProgramRun(wall_s=r.wall_s, user_s=r.user_s, sys_s=r.sys_s, returncode=r.returncode,
                             leftover_processes=list(r.leftover_processes), scratch_files=list(r.scratch_files)) \
            if launcher and r.reported else None
        return ToolRun(r.returncode, r.wall_s, stdout, Path(r.stderr_path).read_bytes(), program)


def true_argv() -> list[str]:
    """A program that does nothing and succeeds, for probes."""
    t = shutil.which("true")
    return [t] if t else [sys.executable, "-c", "pass"]


def last_line(data: bytes, default: str = "") -> str:
    """Last non-empty line of a tool's stderr, for one-line error messages."""
    lines = [ln.strip() for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else default


def log_said(path: str, default: str = "") -> str:
    """What a tool's own log says, in one line: its first ``Error...`` line (what Rust and Go tools
    print before a cause chain and a backtrace), else its last non-empty line, else ``default``."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return default
    lines = [ln.strip() for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("Error")), lines[-1] if lines else default)


def relative_to_root(path: str, source_root: str, cwd: str | None = None) -> str | None:
    """``path`` relative to ``source_root`` when it lies inside it, else None (pure string logic).

    Relative paths are resolved against ``cwd`` when given. Pseudo-files ('??', '<frozen ...>',
    '<string>') are never inside the root.
    """
    if not path or path.startswith(("<", "?", "[")):
        return None
    if not posixpath.isabs(path):
        if not cwd:
            return None
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    root = posixpath.normpath(source_root)
    prefix = root if root.endswith("/") else root + "/"
    if path.startswith(prefix):
        return path[len(prefix):]
    # A run directory can be moved, copied or renamed (an auditor's copy, a test's copy of a prepared
    # run) after its builds were made, and their debug info still names where they were built. pw
    # builds each target in RUN/build/<label>/, so a path through build/<label>/ under any run
    # directory is a file of this build wherever the run now lies and whatever it is now called.
    # (Whatever a build's debug info names is the compiler's word for the code it compiled: a
    # candidate that writes `#line` directives can name any file already, so this trusts nothing new.)
    tail = root.strip("/").split("/")[-2:]
    if len(tail) == 2 and tail[0] == "build":
        marker = "/" + "/".join(tail) + "/"
        at = path.rfind(marker)
        if at > 0:
            return path[at + len(marker):]
    return None


def read_artifacts(capture: Capture) -> dict[str, bytes]:
    """The bytes of every artifact of ``capture`` (the I/O half of capture -> normalize)."""
    return {role: Path(p).read_bytes() for role, p in capture.artifacts.items()}


class Adapter(abc.ABC):
    """Base of every adapter. ``tool_path`` overrides where the tool is found (tests inject it);
    by default the tool is looked up on PATH with ``shutil.which`` at probe/capture time."""

    spec: AdapterSpec

    def __init__(self, tool_path: str | None = None) -> None:
        self.tool_path = tool_path

    def resolve_tool(self) -> str | None:
        """Absolute path of the tool, or None when it is not on PATH (or the injected path)."""
        return shutil.which(self.tool_path or self.spec.tool)

    def require_tool(self) -> str:
        exe = self.resolve_tool()
        if exe is None:
            raise CaptureError(f"{self.tool_path or self.spec.tool} not found on PATH")
        return exe

    def unusable_missing_tool(self) -> Usability:
        return Usability(usable=False, reason=f"{self.tool_path or self.spec.tool} not found on PATH")

    @abc.abstractmethod
    def probe(self) -> Usability:
        """Run the tool on a trivial program and report whether (and how) it works here."""

    @abc.abstractmethod
    def capture(self, req: CaptureRequest) -> Capture:
        """Run ``req.argv`` under the tool; raise ``CaptureError`` on any failure."""

    @abc.abstractmethod
    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        """Pure: artifact bytes (by role) -> Profile. No file system, no environment."""

    def timed_wrap(self, out_dir: str) -> RunWrap | None:
        """How this profiler joins a timed run writing into ``out_dir`` (None: it cannot; routing
        then picks another discovery adapter for timed runs)."""
        return None

    def timed_collect(self, out_dir: str, *, cwd: str, timeout_s: float) -> dict[str, bytes]:
        """The raw evidence of one timed run profiled with ``timed_wrap`` (artifact role -> bytes),
        reduced to what ``normalize`` needs; raises CaptureError when the tool failed."""
        raise CaptureError(f"{self.spec.name} does not profile timed runs")

    def timed_options(self) -> dict[str, str | int | float | bool]:
        """The options timed runs are profiled with (recorded with the campaign)."""
        return {}

    def use_debug_twins(self, twins: dict[str, str]) -> None:
        """Resolve source lines of executables under each timed build directory from its debug twin
        (a second build with `-g` and identical code). Adapters that read no debug info ignore it."""
        return None

    def focus(self, operation: str, launches: int = 0) -> None:
        """Narrow the next capture to one operation (a GPU kernel named by the timeline, with its launch
        count). Adapters that always see the whole program ignore it."""
        return None

    # --- shared capture helpers ------------------------------------------------------------------
    def write_meta(self, out_dir: str, **meta: object) -> str:
        """Write the ``capture.json`` artifact (tool version and options normalize needs)."""
        path = os.path.join(out_dir, CAPTURE_META)
        Path(path).write_bytes(msgspec.json.encode({"adapter": self.spec.name, **meta},
                                                   order="deterministic"))
        return path


class CaptureMeta(msgspec.Struct, frozen=True):
    """The part of ``capture.json`` that normalize reads."""

    adapter: str = ""
    tool_version: str = ""
    cwd: str = ""
    options: dict[str, str | int | float | bool] = {}


def decode_meta(artifacts: Mapping[str, bytes]) -> CaptureMeta:
    raw = artifacts.get(CAPTURE_META)
    return msgspec.json.decode(raw, type=CaptureMeta) if raw else CaptureMeta()


def require_artifact(artifacts: Mapping[str, bytes], role: str, adapter: str) -> bytes:
    try:
        return artifacts[role]
    except KeyError:
        raise ValueError(f"{adapter}: artifact {role!r} missing; got {sorted(artifacts)}") from None
