"""Partial adapters: tools that do not run here, whose pre-captured artifacts a user hands to pw.

HPCToolkit, GVProf, DrGPUM and GPA need an instrumented NVIDIA stack (hpcrun with the sanitizer
patch, a built GPA or DrGPUM install) that neither this machine nor CI has. A user captures on their
own machine and runs ``pw import RUN TOOL=PATH``: the adapter ``read``s the files its tool
documents, ``normalize`` turns their bytes into the common profile, and the run records them as
imported evidence. Such an adapter has no capture stage and cannot reprofile a candidate, so it can
never pass the mechanism gate on its own: its ceiling is ``proposed`` (``AdapterSpec.ceiling``).

The shared parts live here: the gate limits every partial adapter declares, the probe (import-only:
usable when the reader is, never for capture), ``capture`` refusing with the reason, and reading a
tool's output folder into artifact bytes by role (the only file I/O; ``normalize`` stays pure).
"""

from __future__ import annotations

import abc
import os
import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.base import Adapter, AdapterSpec, Capture, CaptureError, CaptureRequest, Usability
from ledger.errors import InputError

IMPORT_MODE = "import-only"
# Bytes one imported file may have: these are text reports and small databases; a larger file is
# almost certainly the wrong path (a whole measurements directory of traces).
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024

# The gates no imported artifact can pass, in the words routing and the brief show. Gate names are
# those of pw.rules.gates.GATE_NAMES (a test keeps them in step).
NO_REPROFILE = "the tool does not run here, so a candidate is never reprofiled with it"
NOT_TIME = "and its metric is not time, so it cannot be set against the timed speedup"
NOT_THIS_HOST = "the candidate's other operations are never remeasured with it"


def gate_limits(*, time_metric: bool) -> dict[str, str]:
    """What an importer's evidence cannot pass. Correctness and significance come from pw's own
    oracle and timing, reproducibility from the ledger: those stay open to any candidate."""
    limits = {"mechanism": NO_REPROFILE + ("" if time_metric else ", " + NOT_TIME),
              "no_collateral": NOT_THIS_HOST}
    return dict(sorted(limits.items()))


def partial_spec(name: str, tool: str, *, measures: list[str], granularity: list[str], targets: list[str],
                 setup_s: float, cost_note: str, time_metric: bool,
                 more_limits: Mapping[str, str] | None = None) -> AdapterSpec:
    """The spec of an importer: diagnosis only, partial, no reprofile, no capture overhead (the
    capture happened elsewhere; ``setup_s`` is what reading costs here), its gate limits declared."""
    return AdapterSpec(name=name, tool=tool, measures=measures, granularity=granularity,  # type: ignore[arg-type]
                       phases=["diagnosis"], targets=targets, can_reprofile=False, partial=True,
                       overhead_factor=0.0, setup_s=setup_s, cost_note=cost_note,
                       gate_limits=dict(sorted({**gate_limits(time_metric=time_metric), **(more_limits or {})}.items())))


class PartialAdapter(Adapter):
    """An adapter that imports pre-captured artifacts (``read`` + ``normalize``) and never captures."""

    #: What a user passes (a directory or a file) and what it must hold, for error lines and docs.
    expects: str = ""

    def probe(self) -> Usability:
        missing = self.reader_missing()
        if missing:
            return Usability(usable=False, mode=IMPORT_MODE, reason=missing)
        return Usability(usable=True, mode=IMPORT_MODE,
                         reason=f"import-only (`pw import RUN {self.spec.name}=PATH`): {self.spec.tool} does not "
                                "run here, so it never captures or reprofiles")

    def reader_missing(self) -> str:
        """Why the reader cannot run here ('' when it can): a parser that needs a package."""
        return ""

    def capture(self, req: CaptureRequest) -> Capture:
        raise CaptureError(f"{self.spec.name} is partial: it imports pre-captured artifacts "
                           f"(`pw import RUN {self.spec.name}=PATH`) and cannot capture or reprofile")

    def findings(self, artifacts: Mapping[str, bytes], known_files: Sequence[str] = ()) -> list[str]:
        """Pure: a few one-line statements the tool itself makes (GPA's suggestions), best first,
        for the brief; the profile holds the numbers. Most tools make none."""
        return []

    @abc.abstractmethod
    def read(self, path: str) -> dict[str, bytes]:
        """The artifacts at ``path`` by role; raise InputError naming what was expected there."""

    # --- helpers for ``read`` -------------------------------------------------------------------
    def _require(self, path: str) -> Path:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{self.spec.name}={path}: no such file or directory; expected {self.expects}")
        return p

    def _files(self, folder: Path, names: Mapping[str, bool]) -> dict[str, bytes]:
        """``names``: file name -> required. Each found file becomes an artifact named like it."""
        out: dict[str, bytes] = {}
        for name, required in names.items():
            f = folder / name
            if f.is_file():
                out[name] = _bytes(self.spec.name, f)
            elif required:
                raise InputError(f"{self.spec.name}={folder}: no {name}; expected {self.expects}")
        return out


def _bytes(adapter: str, f: Path) -> bytes:
    size = f.stat().st_size
    if size > MAX_ARTIFACT_BYTES:
        raise InputError(f"{adapter}: {f} is {size} bytes; expected at most {MAX_ARTIFACT_BYTES} "
                         "(a report or database, not raw traces)")
    return f.read_bytes()


def read_bytes(adapter: str, f: Path) -> bytes:
    """One artifact file's bytes, bounded (see MAX_ARTIFACT_BYTES)."""
    return _bytes(adapter, f)


def text_of(artifacts: Mapping[str, bytes], role: str, adapter: str) -> str:
    """An artifact decoded as text (tools write ASCII/UTF-8; undecodable bytes are replaced)."""
    try:
        return artifacts[role].decode("utf-8", errors="replace")
    except KeyError:
        raise ValueError(f"{adapter}: artifact {role!r} missing; got {sorted(artifacts)}") from None


def basename(path: str) -> str:
    return os.path.basename(path.rstrip("/")) or path


def relative_by_suffix(path: str, known_files: Sequence[str]) -> str | None:
    """The known (run-relative) file that ``path`` on the capture machine ends with (its tree sat
    elsewhere there); the longest such known path wins. None for a file outside the known ones."""
    if not path or path.startswith("~"):
        return None
    norm = posixpath.normpath(path)
    best = [k for k in known_files if norm == k or norm.endswith("/" + k)]
    if best:
        return max(best, key=len)
    return None
