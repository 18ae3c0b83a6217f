"""Atomic file writes: temporary file in the same directory, fsync, rename.

A reader sees the old file or the new one, never a mix; a crash leaves at most a hidden
temporary file beside the target. A write the machine refuses (a full disk, a read-only or
unwritable directory) is a `DiskError` naming the file, with the temporary file removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import disk_error


@contextmanager
def refused_writes(path: object) -> Iterator[None]:
    """Turn an OSError that means "the machine would not take this write" into a DiskError
    naming `path`; any other error passes unchanged."""
    try:
        yield
    except OSError as exc:
        err = disk_error(exc, path)
        if err is None:
            raise
        raise err from None


def write_atomic(path: Path, data: bytes) -> None:
    with refused_writes(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
