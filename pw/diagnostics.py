"""Diagnostics go through structlog to stderr; results go to stdout. Never mix the two.

Warnings always show; debug lines (what was appended, which files were rewritten, every process
run and how it ended, the exception behind an error line) only with `PW_DEBUG` set.

structlog (with the rich traceback machinery it imports) costs about 0.2 s to import on this
class of machine, more than most verbs take to do their work, so it is configured on the first
diagnostic, not at start-up: a verb with nothing to say never pays for it. Call sites of debug
lines check `debugging()` first for the same reason.
"""

from __future__ import annotations

import logging
import os
import sys

_logger = None


def debugging() -> bool:
    return bool(os.environ.get("PW_DEBUG"))


def log():
    """The `pw` logger, configured on first use."""
    global _logger
    if _logger is None:
        import structlog

        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
                structlog.dev.ConsoleRenderer(colors=False),
            ],
            # Debug call sites check `debugging()` themselves (so PW_DEBUG is read at each call, and
            # structlog is not even imported without it); the logger passes what it is given.
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
            # The stream is looked up at each write, so a caller that swaps sys.stderr is obeyed.
            logger_factory=structlog.PrintLoggerFactory(file=_StderrProxy()),
            cache_logger_on_first_use=True,
        )
        _logger = structlog.get_logger("pw")
    return _logger


class _StderrProxy:
    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def projections_written(run_dir, head: int, written: list[str]) -> None:
    if written and debugging():
        log().debug("projections written", run=run_dir.name, head=head, files=",".join(written))


def process_ran(result, *, what: str) -> None:
    """A debug line for one finished child process (an `adapters.process.ProcessResult`)."""
    if debugging():
        log().debug(
            "process", what=what, argv=" ".join(result.argv), exit_code=result.exit_code, signal=result.signal,
            timed_out=result.timed_out, launch_error=result.launch_error, wall_s=round(result.wall_s, 4),
            max_rss_kb=result.max_rss_kb,
        )
