"""Writes the kernel-profile fold as `profile.db`, byte for byte the same on every rebuild.

SQLite's file depends only on the statements run and the library's version, so the writer runs
the same statements in the same order (tables by name, rows by key, one transaction) into a new
file and renames it over the old one: the bytes follow from the ledger alone.
"""

from __future__ import annotations

import json
import operator
import os
import re
import sqlite3
from pathlib import Path

import msgspec

from projections.kernel_profile_db import CacheState, TableRows, sorted_rows

# Stat columns carry the SampleStats field name, except `n` (an args name of single_gemm).
STAT_COLUMNS = (
    ("n_samples", "INTEGER"), ("median_ms", "REAL"), ("mean_ms", "REAL"), ("q1_ms", "REAL"), ("q3_ms", "REAL"),
    ("rel_stdev", "REAL"), ("gpu_time_s", "REAL"), ("stop_reason", "TEXT"), ("statistic", "TEXT"),
    ("rel_ci_half_width", "REAL"), ("ci_low_ms", "REAL"), ("ci_high_ms", "REAL"), ("ci_method", "TEXT"),
    ("lag1_autocorr", "REAL"), ("stop_rule", "TEXT"),
)
TELEMETRY_COLUMNS = (
    ("sm_clock_mhz", "REAL"), ("mem_clock_mhz", "REAL"), ("temperature_c", "REAL"), ("power_w", "REAL"),
    ("throttle_mask", "INTEGER"), ("sm_clock_min_mhz", "REAL"), ("sm_clock_max_mhz", "REAL"),
    ("power_limit_w", "REAL"), ("power_capped", "INTEGER"), ("power_cap_fraction", "REAL"),
)
TAIL_COLUMNS = (("provenance", "TEXT"), ("profiler_revision", "TEXT"), ("device_index", "INTEGER"),
                ("ledger_seq", "INTEGER"))
META_TABLE = "_ledger_head"
# The layout's number: 2 added the interval, statistic and stop-rule columns and the clock range and
# power-cap columns (recorded fixtures of layout 1 are compared column by column).
DB_FORMAT = 2


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_type(value) -> str:
    if isinstance(value, bool | int):
        return "INTEGER"
    return "REAL" if isinstance(value, float) else "TEXT"


def _sql_value(value):
    return int(value) if isinstance(value, bool) else value


RESERVED = {"gpu_name", "backend"} | {c for c, _ in STAT_COLUMNS + TELEMETRY_COLUMNS + TAIL_COLUMNS}


def table_sql(name: str, table: TableRows) -> str:
    clash = RESERVED.intersection(table.arg_names) | RESERVED.intersection(table.metric_names)
    if clash:
        raise ValueError(f"table {name}: args/metrics {sorted(clash)} clash with the row's own columns")
    first = next(iter(sorted_rows(table)))
    cols = ["gpu_name TEXT NOT NULL", "backend TEXT NOT NULL"]
    cols += [f"{_q(a)} {_sql_type(v)} NOT NULL" for a, v in zip(table.arg_names, first.args)]
    cols += [f"{_q(m)} REAL" for m in table.metric_names]
    cols += [f"{c} {t}" for c, t in STAT_COLUMNS + TELEMETRY_COLUMNS + TAIL_COLUMNS]
    unique = ", ".join(["gpu_name", "backend", *(_q(a) for a in table.arg_names)])
    return f"CREATE TABLE {_q(name)} ({', '.join(cols)}, UNIQUE({unique}))"


_PROVENANCE = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # one encoder, not one per row
_stats_of = operator.attrgetter(*("n" if c == "n_samples" else c for c, _ in STAT_COLUMNS))
_telemetry_of = operator.attrgetter(*(c for c, _ in TELEMETRY_COLUMNS))


_NOT_PLAIN = re.compile(rb"[\x00-\x1f\x7f-\xff]")


def _provenance_text(prov: dict[str, str]) -> str:
    """`json.dumps(prov, sort_keys=True, separators=(",", ":"))`, the column's text since layout 1.

    msgspec writes the same bytes for ASCII text ten times faster; anything else (a non-ASCII or
    control character, which the two escape differently) takes the json module's path."""
    fast = msgspec.json.encode(prov, order="sorted")
    return _PROVENANCE.encode(prov) if _NOT_PLAIN.search(fast) else fast.decode()


def row_values(table: TableRows, row) -> tuple:
    ev = row.event
    tel = _telemetry_of(ev.telemetry)
    return (
        row.gpu_name, row.backend, *(int(v) if v is True or v is False else v for v in row.args),
        *map(ev.metrics.get, table.metric_names), *_stats_of(ev.stats),
        *(int(v) if v is True or v is False else v for v in tel),
        _provenance_text(ev.provenance), ev.profiler_revision, ev.device_index, row.seq,
    )


def write(db_path: Path, state: CacheState) -> None:
    """Replace `db_path` with the projection of `state` (atomically: a reader sees old or new)."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = db_path.with_name(f".{db_path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        _write_tmp(tmp, state)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, db_path)
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves no temporary file behind


def _write_tmp(tmp: Path, state: CacheState) -> None:
    con = sqlite3.connect(tmp, isolation_level=None)
    try:
        con.execute("PRAGMA page_size=4096")
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("BEGIN")
        con.execute(f"CREATE TABLE {META_TABLE} (head_seq INTEGER NOT NULL, head_hash TEXT NOT NULL)")
        con.execute(f"INSERT INTO {META_TABLE} VALUES (?, ?)", (state.head_seq, state.head_hash))
        for name in sorted(state.tables):
            table = state.tables[name]
            if not table.rows:
                continue
            con.execute(table_sql(name, table))
            width = 2 + len(table.arg_names) + len(table.metric_names) + len(STAT_COLUMNS) + len(
                TELEMETRY_COLUMNS) + len(TAIL_COLUMNS)
            con.executemany(f"INSERT INTO {_q(name)} VALUES ({', '.join('?' * width)})",
                            [row_values(table, r) for r in sorted_rows(table)])
        con.execute("COMMIT")
    finally:
        con.close()


def head_of(db_path: Path) -> tuple[int, str] | None:
    """The ledger head a database was written from, or None when there is no readable database."""
    if not db_path.is_file():
        return None
    try:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = con.execute(f"SELECT head_seq, head_hash FROM {META_TABLE}").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return None
    return (int(row[0]), str(row[1])) if row else None
