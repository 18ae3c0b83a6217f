"""The kernel-profile cache as rows: a pure fold of the cache ledger's events.

The last `KernelMeasured` event for a key (gpu_name, backend, args) wins, so `run --force` is a
new event, never an edit. Failures are kept for reporting but are never rows, and so are
measurements SQLite cannot hold (an integer beyond int64, written before specs were bounded): they
are listed, never allowed to poison the database for every later verb. No I/O here; the SQLite
writer is `projections/materialize_kernel_profile.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ledger.events import Envelope, LedgerRepaired, Note
from ledger.kernel_events import ArgValue, KernelMeasured, KernelMeasurementFailed

# Events a cache ledger may hold that say nothing about rows.
IGNORED = (LedgerRepaired, Note)
INT64 = (-(1 << 63), (1 << 63) - 1)  # what an SQLite INTEGER holds


class Row(NamedTuple):  # a tuple: a fold of 100,000 events makes 100,000 of them
    gpu_name: str
    backend: str
    args: tuple[ArgValue, ...]
    event: KernelMeasured
    seq: int


@dataclass
class TableRows:
    arg_names: tuple[str, ...]
    metric_names: list[str] = field(default_factory=list)  # in order of first appearance
    rows: dict[tuple, Row] = field(default_factory=dict)  # (gpu_name, backend, *args) -> Row
    seen_metrics: set[str] = field(default_factory=set)  # metric_names and the args, for a quick check


@dataclass
class CacheState:
    tables: dict[str, TableRows] = field(default_factory=dict)
    failures: list[tuple[int, KernelMeasurementFailed]] = field(default_factory=list)
    unstorable: list[tuple[int, str]] = field(default_factory=list)  # (seq, why) of rows SQLite cannot hold
    head_seq: int = 0
    head_hash: str = ""


def initial() -> CacheState:
    return CacheState()


def evolve(state: CacheState, env: Envelope) -> CacheState:
    """Apply one event (mutating and returning `state`: a fold over one ledger read, never shared)."""
    data = env.data
    if isinstance(data, KernelMeasured) and (why := _unstorable(data)):
        state.unstorable.append((env.seq, why))
    elif isinstance(data, KernelMeasured):
        table = state.tables.get(data.table)
        if table is None:
            names = tuple(data.arg_names)
            table = state.tables[data.table] = TableRows(arg_names=names, seen_metrics=set(names))
        if len(data.arg_names) != len(table.arg_names) or tuple(data.arg_names) != table.arg_names:
            raise ValueError(f"ledger seq {env.seq}: {data.table} args {tuple(data.arg_names)} differ from "
                             f"{table.arg_names}")
        if not table.seen_metrics.issuperset(data.metrics):
            for m in data.metrics:
                # A metric that is also an arg (all_reduce's message_size_bytes) lives in the arg column.
                if m not in table.seen_metrics:
                    table.metric_names.append(m)
                    table.seen_metrics.add(m)
        args = tuple(data.arg_values)
        table.rows[(data.gpu_name, data.backend, *args)] = Row(data.gpu_name, data.backend, args, data, env.seq)
    elif isinstance(data, KernelMeasurementFailed):
        state.failures.append((env.seq, data))
    elif not isinstance(data, IGNORED):
        raise ValueError(f"ledger seq {env.seq}: event {env.type} does not belong in a kernel-profile ledger")
    state.head_seq, state.head_hash = env.seq, env.hash
    return state


def _fits(value) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or INT64[0] <= value <= INT64[1]


def _unstorable(data: KernelMeasured) -> str | None:
    lo, hi = INT64
    mask = data.telemetry.throttle_mask
    fits = lo <= data.stats.n <= hi and lo <= data.device_index <= hi and (mask is None or lo <= mask <= hi)
    if fits:
        for v in data.arg_values:
            if type(v) is int and not lo <= v <= hi:
                fits = False
                break
    if fits:
        return None  # the common case, checked without building a message
    for name, value in zip(data.arg_names, data.arg_values):
        if not _fits(value):
            return f"arg {name}={value} does not fit an SQLite INTEGER (int64)"
    for name, value in (("telemetry.throttle_mask", mask), ("stats.n", data.stats.n),
                        ("device_index", data.device_index)):
        if value is not None and not _fits(value):
            return f"{name}={value} does not fit an SQLite INTEGER (int64)"
    return None


def fold(events: list[Envelope]) -> CacheState:
    state = initial()
    for env in events:
        state = evolve(state, env)
    return state


def sorted_rows(table: TableRows) -> list[Row]:
    """Rows in key order; mixed value types in one column are ordered by type name first (where every
    column holds one type, as it does in practice, the values alone give that same order)."""
    rows = list(table.rows.values())
    if len({tuple(map(type, r.args)) for r in rows}) <= 1:
        return sorted(rows, key=lambda r: (r.gpu_name, r.backend, r.args))
    return sorted(rows, key=lambda r: (r.gpu_name, r.backend, *((type(v).__name__, v) for v in r.args)))
