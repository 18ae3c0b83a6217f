"""Projection formats: the bytes an older ProfileWeaver wrote for the same ledger.

A projection is a pure function of the ledger, but the function changes between versions (a field
added to a document, a list that did not exist), so an older run's stored projections differ from
today's rebuild although nothing was edited. `FORMAT` numbers today's rendering; `STEPS[k]` turns a
file rendered in format k into what format k - 1 wrote for the same state, or None where format
k - 1 could not have written that state (it says something that format had no place for). `pw audit`
uses them to recognise an older format's file by recomputing its bytes from this very ledger.

No marker in the files says which format they are in. A marker would be part of what an editor of
the file writes: a forged "old format" could then excuse any difference. Bytes recomputed from the
ledger cannot be forged: a file is of format k only if it is exactly what format k renders.

Whenever a change alters any projection's bytes for the same ledger, bump `FORMAT` and add the step
(tests/test_projection_formats.py keeps a format-1 set of a recorded run that must stay recognised).

Pure: bytes in, bytes out.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatch
from typing import Any, NamedTuple

import msgspec

from ledger.contract import Profiling

FORMAT = 6

Downgrade = Callable[[bytes], bytes | None]


class Step(NamedTuple):
    """From format `k` to `k - 1`: what changed, and per file (a glob on its run-relative name) the
    downgrade. A file no step names was rendered the same by both formats. `added`: globs of files
    format `k` writes and format `k - 1` did not write at all (absent from an older run)."""

    changed: str
    files: dict[str, Downgrade]
    added: tuple[str, ...] = ()


def _json(edit: Callable[[Any], bool]) -> Downgrade:
    """A downgrade of a JSON projection: `edit` changes the decoded document in place (key order
    kept: documents are rendered in declaration order) and says whether the older format could have
    written it. Encoded as `ledger.codec.canonical_json` encodes."""

    def down(data: bytes) -> bytes | None:
        try:
            doc = msgspec.json.decode(data)
        except msgspec.DecodeError:
            return None
        if not edit(doc):
            return None
        return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"

    return down


# --- 2 -> 1: the loop after the first win (RoutingDecided v2, routing climbs, reprofile budgets,
# diagnosis reprofiles, evidence reused by executable hash) ----------------------------------------

_PROFILING = Profiling()


def _plan_1(doc: Any) -> bool:
    """Format 1's contract had no reprofile budget: a plan at the defaults (what a format-1 ledger
    decodes to) loses nothing without it; one that sets another budget was not written by format 1."""
    contract = doc.get("contract") if isinstance(doc, dict) else None
    p = contract.get("profiling") if isinstance(contract, dict) else None
    if not isinstance(p, dict) or (p.get("max_runs"), p.get("max_time_s")) != (_PROFILING.max_runs,
                                                                               _PROFILING.max_time_s):
        return False
    del p["max_runs"], p["max_time_s"]
    return True


def _routing_1(doc: Any) -> bool:
    """Format 1 had one decision per phase and no measured overheads: no `climbs` list (one climb at
    most, the diagnosis phase's own decision) and no `overheads` in a decision."""
    phases = doc.get("phases") if isinstance(doc, dict) else None
    if not isinstance(phases, dict) or not all(isinstance(d, dict) and d.get("overheads") == {}
                                               for d in phases.values()):
        return False
    one = [phases["diagnosis"]] if "diagnosis" in phases else []
    if doc.get("climbs") != one:
        return False
    for d in phases.values():
        del d["overheads"]
    del doc["climbs"]
    return True


def _report_1(doc: Any) -> bool:
    """Format 1's candidates had no diagnosis reprofile and reused no evidence."""
    cands = doc.get("candidates") if isinstance(doc, dict) else None
    if not isinstance(cands, list) or not all(isinstance(c, dict) and c.get("diagnosis", 0) is None
                                              and c.get("reused") == [] for c in cands):
        return False
    for c in cands:
        del c["diagnosis"], c["reused"]
    return True


# --- 3 -> 2: a build's running image (gate rules 13, pw.workload.image) -----------------------------


def _build_without(key: str) -> Callable[[Any], bool]:
    """A preflight downgrade to a format whose build had no ``key``: a build without one (every
    older ledger's) loses nothing without the key; one that has it was not written by that format."""

    def edit(doc: Any) -> bool:
        build = doc.get("build") if isinstance(doc, dict) else None
        if build is None:
            return True
        if not isinstance(build, dict) or build.get(key) is not None:
            return False
        del build[key]
        return True

    return edit


_preflight_2 = _build_without("image_sha256")  # format 2's build had no running image


# --- 4 -> 3: why a build failed although its steps passed (a tree pw will not judge, issue 26) ------


_preflight_3 = _build_without("problem")  # format 3's build had no problem


# --- 4 -> 3: one kind of run (an operation's cost as the metric), a region named by its timer line ------


def _plan_3(doc: Any) -> bool:
    """Format 3's metric had no `operation` and no `timer`: a plan without them (every format-3
    ledger's) loses nothing without the keys; a metric naming either was not written by format 3."""
    contract = doc.get("contract") if isinstance(doc, dict) else None
    metric = contract.get("metric") if isinstance(contract, dict) else None
    if not isinstance(metric, dict) or metric.get("operation") is not None or metric.get("timer") is not None:
        return False
    metric.pop("operation", None)
    metric.pop("timer", None)
    return True


def _report_3(doc: Any) -> bool:
    """Format 3's candidates had no claim findings and no unprofiled pairs."""
    cands = doc.get("candidates") if isinstance(doc, dict) else None
    if not isinstance(cands, list) or not all(isinstance(c, dict) and c.get("findings") == []
                                              and c.get("unprofiled") is None for c in cands):
        return False
    for c in cands:
        del c["findings"], c["unprofiled"]
    return True


# --- 5 -> 4: what each actor was handed (cost.json `actors`, `total`; issue 30) --------------------


def _cost_4(doc: Any) -> bool:
    """Format 4's cost.json had only the current brief's `tokens`: dropping the per-actor record
    loses nothing format 4 said. A cost.json without a brief (only imports or views) was never
    written by format 4."""
    if not isinstance(doc, dict) or "actors" not in doc or "total" not in doc or not doc.get("tokens"):
        return False
    del doc["actors"], doc["total"]
    return True


# --- 6 -> 5: the unprofiled pairs of a run judged on one operation's cost say they time the whole process


def _report_5(doc: Any) -> bool:
    """Format 5's unprofiled pairs carried no `of` (said only where the run's metric is an operation's
    cost, whose unprofiled pairs time the whole process)."""
    cands = doc.get("candidates") if isinstance(doc, dict) else None
    if not isinstance(cands, list):
        return False
    for c in cands:
        u = c.get("unprofiled") if isinstance(c, dict) else None
        if isinstance(u, dict):
            u.pop("of", None)
    return True


_OF_WHOLE = "; the whole process, not the operation's cost):"


def _report_md_5(data: bytes) -> bytes | None:
    return data.replace(_OF_WHOLE.encode(), b"):")


STEPS: dict[int, Step] = {
    2: Step("routing climbs and measured overheads (profiler-routing.json), the reprofile budget "
            "(experiment-plan.json), diagnosis reprofiles and reused evidence (report.json)",
            {"experiment-plan.json": _json(_plan_1), "profiler-routing.json": _json(_routing_1),
             "report.json": _json(_report_1)}),
    3: Step("a build's running image (preflight.json)", {"preflight.json": _json(_preflight_2)}),
    4: Step("a metric that is one operation's cost or a region named by its timer line (experiment-plan.json); "
            "claim findings and unprofiled pairs (report.json); why a build whose steps passed failed "
            "(preflight.json)",
            {"experiment-plan.json": _json(_plan_3), "report.json": _json(_report_3),
             "preflight.json": _json(_preflight_3)}),
    5: Step("what each actor was handed (cost.json actors and total), and the documents' run-directory "
            "files (brief.md, plan.json, harness-state.json, bench.*.json, experiment-state.json, "
            "campaign-plan.json, campaign-result.json)",
            {"cost.json": _json(_cost_4)},
            added=("brief.md", "plan.json", "harness-state.json", "bench.*.json", "experiment-state.json",
                   "campaign-plan.json", "campaign-result.json")),
    6: Step("a run judged on one operation's cost says its unprofiled pairs time the whole process "
            "(report.json, report.md)",
            {"report.json": _json(_report_5), "report.md": _report_md_5}),
}


def rendered_in(name: str, current: bytes, version: int) -> bytes | None:
    """What format `version` wrote for the file `name` that today's format renders as `current`;
    None where that format could not have written it."""
    data: bytes | None = current
    for k in range(FORMAT, version, -1):
        step = STEPS[k]
        down = next((f for pattern, f in step.files.items() if fnmatch(name, pattern)), None)
        if down is not None:
            data = down(data)
            if data is None:
                return None
    return data


def absent_in(name: str) -> int | None:
    """The newest older format that did not write the file `name` at all (None: every format since
    the first writes it), so its absence from an older run is that format's, not a deletion."""
    for k in range(FORMAT, 1, -1):
        if any(fnmatch(name, pattern) for pattern in STEPS[k].added):
            return k - 1
    return None


def recognise(name: str, on_disk: bytes, current: bytes) -> int | None:
    """The older format whose rendering of this state `on_disk` is, byte for byte; None if none is."""
    for version in range(FORMAT - 1, 0, -1):
        older = rendered_in(name, current, version)
        if older is None:
            return None
        if older == on_disk:
            return version
    return None


def changed_since(version: int) -> str:
    """What changed in the projections after format `version`, oldest first."""
    return "; ".join(f"format {k} changed {STEPS[k].changed}" for k in range(version + 1, FORMAT + 1))
