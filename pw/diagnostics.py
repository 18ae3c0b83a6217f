"""Diagnostics go through structlog to stderr; results go to stdout. Never mix the two."""

from __future__ import annotations

import logging
import os
import sys

_configured = False


def configure() -> None:
    global _configured
    if _configured:
        return
    import structlog

    level = logging.DEBUG if os.environ.get("PW_DEBUG") else logging.WARNING
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    _configured = True


def log():
    import structlog

    return structlog.get_logger("pw")
