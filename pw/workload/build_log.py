"""What a failed build said: the compiler's first error lines and where its whole log is.

A build step's log is kept as evidence (`steps._store_log`: the command, then its stdout and its
stderr). A person reading "the build failed" needs the first errors the compiler printed, not the
make noise after them, and the path of the full log; both come from that stored log, so they read
the same in `pw start`, `pw evaluate` and any later look at the run.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

from ledger import events as ev
from ledger.evidence import EvidenceStore

MAX_LINES = 8  # of compiler output quoted in a message
MAX_CHARS = 200  # of one quoted line
# A diagnostic line as gcc, clang, nvcc, ld, make, cmake and python print them.
_ERROR = re.compile(r"\berror\b|\bfatal\b|undefined reference|cannot find|no such file|not found|"
                    r"\*\*\*|Traceback|Error \d", re.IGNORECASE)
# What a tool prints when the machine refused its write: the build did not fail, the disk did.
_REFUSED = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
}


def _streams(log: bytes) -> tuple[str, str]:
    """(stdout, stderr) of a stored build log."""
    text = log.decode(errors="replace")
    _, _, rest = text.partition("== stdout ==\n")
    out, _, err = rest.partition("\n== stderr ==\n")
    return out, err


def first_errors(log: bytes, limit: int = MAX_LINES) -> list[str]:
    """The first diagnostic lines of a build log (stderr first, then stdout), at most `limit`,
    each cut to MAX_CHARS; without one, the last lines of stderr (or stdout) instead."""
    out, err = _streams(log)
    for text in (err, out):
        hits = [line.strip() for line in text.splitlines() if _ERROR.search(line)]
        if hits:
            return [_clip(line) for line in hits[:limit]]
    for text in (err, out):
        tail = [line.strip() for line in text.splitlines() if line.strip()]
        if tail:
            return [_clip(line) for line in tail[-limit:]]
    return []


def _clip(line: str) -> str:
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..."


def refused_write(log: bytes, build_dir: Path) -> int | None:
    """The errno of a write the machine refused, when the failed step's output says so: a full disk
    or a quota, or a read-only filesystem when it is the build tree's own (the sandbox keeps the
    system read-only on purpose: a build that writes there fails as a build)."""
    import os

    text = log.decode(errors="replace")
    code = next((code for words, code in _REFUSED.items() if words in text), None)
    if code == errno.EROFS:
        try:
            return code if os.statvfs(build_dir).f_flag & os.ST_RDONLY else None
        except OSError:
            return None
    return code


def failed_step(built: ev.BuildFinished) -> ev.StepOutcome | None:
    return built.steps[-1] if built.outcome != "ok" and built.steps else None


def log_path(evidence: EvidenceStore, step: ev.StepOutcome) -> Path | None:
    return evidence.path_for(step.log_sha256) if step.log_sha256 else None


def summary(built: ev.BuildFinished, evidence: EvidenceStore) -> tuple[list[str], Path | None]:
    """The failed step's first error lines and its log's path (an empty list and None when the
    build did not fail or its log is gone)."""
    step = failed_step(built)
    if step is None or not step.log_sha256 or not evidence.has(step.log_sha256):
        return [], None
    return first_errors(evidence.get(step.log_sha256)), log_path(evidence, step)


def one_line(lines: list[str]) -> str:
    """Quoted error lines as one line (messages and events are one line each)."""
    return " | ".join(lines)
