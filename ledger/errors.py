"""The one error family of ProfileWeaver.

Every error a user can cause or meet carries the exit code the CLI should use and a one-line
message that names the input and what was expected. Only the CLI renders them.
"""

from __future__ import annotations

import errno as _errno

# The exit codes of `pw` (AGENTS.md, "Command-line conventions"). Each says what the caller does
# next, so an error's code follows from its class, never from its message.
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a verdict or check ran and did not pass: read the result
EXIT_BAD_INPUT = 2     # bad input or usage: fix the command, file or path the message names
EXIT_TOOL_FAILED = 3   # an external tool or the machine failed: nothing was judged; fix the environment
EXIT_CONFLICT = 4      # another writer appended first: nothing was written; run the command again
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_CHECK_FAILED: "a verdict or check did not pass",
    EXIT_BAD_INPUT: "bad input or usage",
    EXIT_TOOL_FAILED: "an external tool or the machine failed, nothing was judged",
    EXIT_CONFLICT: "another writer appended first, nothing was written: run it again",
}


class PWError(Exception):
    """Base of every error ProfileWeaver reports to a person or an agent."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(self, message: str) -> None:
        # One line only: a newline inside an error would break "one clear line on stderr".
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)


class UsageError(PWError):
    """The command line itself was wrong (unknown verb, missing argument)."""

    exit_code = EXIT_BAD_INPUT


class InputError(PWError):
    """A file, path or value given to us is not what was expected."""

    exit_code = EXIT_BAD_INPUT


class LedgerCorrupt(InputError):
    """The ledger cannot be trusted as it is: a bad line, a broken chain, an unknown version."""

    def __init__(self, message: str, *, seq: int | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq
        self.offset = offset


class TornTail(LedgerCorrupt):
    """The last bytes of the ledger are an incomplete or undecodable append; `pw repair` fixes it."""


class NewerLedger(LedgerCorrupt):
    """A whole, hashed event of a version newer than this code understands: upgrade ProfileWeaver.
    Not damage: neither repair nor audit can say anything about it."""


class ConcurrencyError(PWError):
    """Another writer appended first: the expected sequence number is stale. Nothing was written.
    Neither a verdict nor bad input: the same command, run again, decides against the new state."""

    exit_code = EXIT_CONFLICT

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class HeldElsewhere(PWError):
    """Another live process holds what this command needs (a candidate being evaluated): refused at
    once, before any work. Same exit as a lost race: the command, run again later, goes through."""

    exit_code = EXIT_CONFLICT


class MergeConflict(PWError):
    """Rows measured elsewhere (a Slurm job) cannot be merged: another writer stored rows for the
    same keys meanwhile. Nothing was merged; the report names the rows. Run again to measure only
    what is still missing."""

    exit_code = EXIT_CONFLICT


class RejectedCommand(PWError):
    """A command is not valid against the current state (decide refused it). No event was appended."""

    exit_code = EXIT_BAD_INPUT


class WorkloadError(PWError):
    """The workload failed in a classified way (build, launch, oracle, timeout, crash): the user's
    program did not pass a check it must pass (it builds, runs, and agrees with its oracle)."""

    exit_code = EXIT_CHECK_FAILED

    def __init__(self, message: str, *, failure_class: str) -> None:
        super().__init__(message)
        self.failure_class = failure_class


class ToolError(PWError):
    """An external tool (profiler, compiler, patch) could not do what was asked: nothing was judged."""

    exit_code = EXIT_TOOL_FAILED


# errno values that mean the machine would not take a write (full, over quota, read-only, not
# permitted), not that ProfileWeaver is wrong: each becomes a DiskError naming the path.
DISK_ERRNOS: dict[int, str] = {
    _errno.ENOSPC: "no space left on the device",
    _errno.EDQUOT: "disk quota exceeded",
    _errno.EFBIG: "file too large for the filesystem",
    _errno.EROFS: "read-only filesystem",
    _errno.EACCES: "permission denied",
    _errno.EPERM: "operation not permitted",
}


class DiskError(ToolError):
    """The machine refused a write (ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EPERM) at `path`. Nothing
    half-written was kept: the ledger holds every step completed before it. `resume` is the command
    that continues once the cause is fixed; the layer that knows it (the verb) fills it in."""

    def __init__(self, path: object, errno: int, *, resume: str | None = None, kept: str | None = None) -> None:
        self.path = str(path)
        self.errno = errno
        self.kept = kept or "nothing half-written was kept; the ledger holds every completed step"
        self.resume = resume
        what = DISK_ERRNOS.get(errno, "write refused")
        fix = ("mount it writable" if errno == _errno.EROFS else "give this user access to it"
               if errno in (_errno.EACCES, _errno.EPERM) else "free space")
        then = f", then run `{resume}`" if resume else ", then run the same command again"
        super().__init__(f"{self.path}: {what} ({_errno.errorcode.get(errno, errno)}); {self.kept}; {fix}{then}")

    def with_resume(self, resume: str, *, kept: str | None = None, replace: bool = False) -> DiskError:
        """The same error, saying how to continue: an inner layer that knows better (the projections
        are behind: `pw rebuild`) is kept unless `replace` (a verb whose resume does it all)."""
        if self.resume is not None and not replace:
            return self
        return DiskError(self.path, self.errno, resume=resume, kept=kept or self.kept)


def disk_error(exc: BaseException, path: object = None) -> DiskError | None:
    """`exc` as a DiskError naming `path` (else the path the OS error names), or None when it is not
    a refused write."""
    if isinstance(exc, DiskError):
        return exc
    if not isinstance(exc, OSError) or exc.errno not in DISK_ERRNOS:
        return None
    return DiskError(path if path is not None else (exc.filename or "?"), exc.errno)
