"""The one error family of ProfileWeaver.

Every error a user can cause or meet carries the exit code the CLI should use and a one-line
message that names the input and what was expected. Only the CLI renders them.
"""

from __future__ import annotations


class PWError(Exception):
    """Base of every error ProfileWeaver reports to a person or an agent."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        # One line only: a newline inside an error would break "one clear line on stderr".
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)


class UsageError(PWError):
    """The command line itself was wrong (unknown verb, missing argument)."""

    exit_code = 2


class InputError(PWError):
    """A file, path or value given to us is not what was expected."""

    exit_code = 2


class LedgerCorrupt(InputError):
    """The ledger cannot be trusted as it is: a bad line, a broken chain, an unknown version."""

    def __init__(self, message: str, *, seq: int | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq
        self.offset = offset


class TornTail(LedgerCorrupt):
    """The last bytes of the ledger are an incomplete or undecodable append; `pw repair` fixes it."""


class ConcurrencyError(PWError):
    """Another writer appended first: the expected sequence number is stale. Nothing was written."""

    exit_code = 1

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class RejectedCommand(PWError):
    """A command is not valid against the current state (decide refused it). No event was appended."""

    exit_code = 2


class WorkloadError(PWError):
    """The workload failed in a classified way (build, launch, oracle, timeout, crash)."""

    exit_code = 1

    def __init__(self, message: str, *, failure_class: str) -> None:
        super().__init__(message)
        self.failure_class = failure_class


class ToolError(PWError):
    """An external tool (profiler, compiler) could not do what was asked."""

    exit_code = 1
