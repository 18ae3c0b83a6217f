"""The autotune cache: one tuning per (kernel, shape key, GPU key, library versions), shared by every
worker and every run of one kernel-profile database.

`triton.autotune` benchmarks every config the first time a process meets a key and forgets the
answer when the process ends, so a fill spread over workers tunes again in every worker and a later
run tunes again from scratch (seed 003: one submission spent 166 s tuning against 5.7 s measuring).
Here a tuning is a small JSON file named by the sha256 of its key, in a folder beside profile.db
(`<stem>.autotune/`). A worker that needs a key holds that key's lock (`flock`) while it looks and,
on a miss, tunes: two workers meeting the same key at once tune it once, the second waits and reads
the first's answer. Entries are written under a temporary name and renamed, so a reader sees a whole
entry or none; an unreadable entry, or one whose key differs from its name's, is tuned again and the
row says so.

A cache, not the truth: the row's provenance records the tuning it was measured with (key digest,
chosen config, what the tuning cost, whether this run tuned or reused it), so the cache ledger alone
says what every row ran. Only worker processes use this module; it needs no GPU.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import msgspec

from ledger.files import write_atomic

FORMAT = 1
ConfigValue = int | str


class AutotuneEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    format: int
    kernel: str  # the kernel's id, bumped with its source or its config list
    shape_key: dict[str, str]
    gpu: str  # the device's normalized name: tunings follow the hardware, not a database key
    versions: dict[str, str]  # the libraries that compile and run it
    config: dict[str, ConfigValue]  # the chosen config
    configs_tried: int
    tuning_s: float  # wall time of the tuning (compilation and benchmarking of every config)
    timings_ms: dict[str, float | None]  # config (as text) -> its benchmarked median (None: did not run)
    tuned_by: str  # host:pid
    tuned_at: str  # UTC


@dataclass(frozen=True)
class Tuned:
    """What a tune function returns."""

    config: dict[str, ConfigValue]
    configs_tried: int
    timings_ms: dict[str, float | None]


@dataclass(frozen=True)
class Tuning:
    entry: AutotuneEntry
    source: Literal["tuned", "cache"]
    digest: str
    wait_s: float  # time spent waiting for another worker's tuning of the same key
    note: str = ""

    def provenance(self) -> dict[str, str]:
        """The row's provenance fields for this tuning (all text, like every provenance value)."""
        out = {
            "autotune": self.source,
            "autotune_key": self.digest[:16],
            "autotune_config": config_text(self.entry.config),
            "autotune_tuning_s": f"{self.entry.tuning_s:.3f}",
            "autotune_configs": str(self.entry.configs_tried),
            "autotune_wait_s": f"{self.wait_s:.3f}",
        }
        if self.note:
            out["autotune_note"] = self.note
        return out


def config_text(config: dict[str, ConfigValue]) -> str:
    return ",".join(f"{k}={config[k]}" for k in sorted(config))


def key_digest(kernel: str, shape_key: dict[str, str], gpu: str, versions: dict[str, str]) -> str:
    doc = {"kernel": kernel, "shape_key": shape_key, "gpu": gpu, "versions": versions}
    return hashlib.sha256(msgspec.json.encode(doc, order="sorted")).hexdigest()


_decoder = msgspec.json.Decoder(AutotuneEntry)


class AutotuneCache:
    """`root` None: a process-local cache (nothing shared, nothing stored). `store` False: stored
    tunings are used and new ones are not stored (`run --fresh` leaves every cache as it was)."""

    def __init__(self, root: str | os.PathLike | None, *, store: bool = True) -> None:
        self.root = Path(root) if root else None
        self.store = store
        self._local: dict[str, AutotuneEntry] = {}

    def get(self, kernel: str, shape_key: dict[str, str], gpu: str, versions: dict[str, str],
            tune: Callable[[], Tuned]) -> Tuning:
        """The tuning for this key: from this process, from the shared folder, or tuned now (once)."""
        shape_key = {k: str(v) for k, v in shape_key.items()}
        digest = key_digest(kernel, shape_key, gpu, versions)
        if digest in self._local:
            return Tuning(self._local[digest], "cache", digest, 0.0)
        if self.root is None or (not self.store and not self.root.is_dir()):
            return self._tune(kernel, shape_key, gpu, versions, tune, digest, 0.0, "")
        path = self.root / f"{digest}.json"
        if not self.store:
            entry, why = _read(path, digest, kernel, shape_key, gpu, versions)
            if entry is not None:
                self._local[digest] = entry
                return Tuning(entry, "cache", digest, 0.0)
            return self._tune(kernel, shape_key, gpu, versions, tune, digest, 0.0, why)
        self.root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        lock = os.open(self.root / f"{digest}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker tuning this key finishes first
            wait_s = time.monotonic() - t0
            entry, why = _read(path, digest, kernel, shape_key, gpu, versions)
            if entry is not None:
                self._local[digest] = entry
                return Tuning(entry, "cache", digest, wait_s)
            tuning = self._tune(kernel, shape_key, gpu, versions, tune, digest, wait_s, why)
            _write(path, tuning.entry)
            return tuning
        finally:
            os.close(lock)

    def _tune(self, kernel, shape_key, gpu, versions, tune, digest, wait_s, note) -> Tuning:
        t0 = time.monotonic()
        got = tune()
        entry = AutotuneEntry(format=FORMAT, kernel=kernel, shape_key=shape_key, gpu=gpu, versions=versions,
                              config=dict(got.config), configs_tried=got.configs_tried,
                              tuning_s=round(time.monotonic() - t0, 4), timings_ms=dict(got.timings_ms),
                              tuned_by=f"{socket.gethostname()}:{os.getpid()}",
                              tuned_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self._local[digest] = entry
        return Tuning(entry, "tuned", digest, wait_s, note)


def _read(path: Path, digest: str, kernel, shape_key, gpu, versions) -> tuple[AutotuneEntry | None, str]:
    """The stored entry, or None and why (empty when there was none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    try:
        entry = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"stored tuning {path.name} unreadable ({exc}): tuned again"
    same = (entry.format, entry.kernel, entry.shape_key, entry.gpu, entry.versions) == (
        FORMAT, kernel, shape_key, gpu, versions)
    if not same or key_digest(entry.kernel, entry.shape_key, entry.gpu, entry.versions) != digest:
        return None, f"stored tuning {path.name} is for another key: tuned again"
    return entry, ""


def _write(path: Path, entry: AutotuneEntry) -> None:
    write_atomic(path, msgspec.json.format(msgspec.json.encode(entry), indent=1) + b"\n")
