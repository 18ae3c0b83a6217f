"""`pw audit`: recompute everything a run claims and name the first thing that does not follow.

Checks run in order; the first failure is the answer. Later parts of the system (verdicts,
statistics, gates) add their checks to `CHECKS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec

from ledger.evidence import EvidenceStore
from ledger.store import Ledger
from projections import documents, formats, state
from projections.materialize import compare
from pw.app.runpath import RunDir


class AuditContext(msgspec.Struct):
    run: RunDir
    events: list
    state: state.RunState
    files: dict[str, bytes]
    evidence: EvidenceStore
    notes: list[str] = []  # what a passing check still says (an older projection format)
    printed: list[tuple[int, str]] = []  # chain heads given on the command line (`--anchor`)
    # What a passing check says instead of "ok" (by check name): what it could not look at.
    details: dict[str, str] = {}


class CheckResult(msgspec.Struct, frozen=True):
    name: str
    ok: bool
    detail: str


class AuditReport(msgspec.Struct, frozen=True):
    ok: bool
    head_seq: int
    checks: list[CheckResult]
    first_divergence: str | None
    notes: list[str] = []


def _evidence_refs(events) -> list[tuple[int, str]]:
    """Every (seq, sha256) an event cites as raw evidence."""
    refs: list[tuple[int, str]] = []
    for env in events:
        for value in _walk(env.data):
            refs.append((env.seq, value))
    return refs


def _walk(obj):
    from ledger.events import ProfiledRun

    if isinstance(obj, ProfiledRun):  # one timed run's evidence: its raw artifacts and its profile
        yield from obj.raw.values()
        yield obj.profile
        return
    if isinstance(obj, msgspec.Struct):
        for field in obj.__struct_fields__:
            value = getattr(obj, field)
            if field.endswith("sha256") and isinstance(value, str) and field not in _NOT_EVIDENCE:
                yield value
            elif field == "artifacts" and isinstance(value, dict):
                yield from value.values()
            else:
                yield from _walk(value)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _walk(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _walk(item)


# Hashes that identify inputs rather than stored evidence files.
_NOT_EVIDENCE = frozenset({
    "inputs_sha256", "source_sha256", "manifest_sha256", "binary_sha256", "torn_sha256", "parent_source_sha256",
    "executable_sha256", "image_sha256",
})


def check_evidence(ctx: AuditContext) -> str | None:
    for seq, digest in _evidence_refs(ctx.events):
        if not digest:
            continue
        if not ctx.evidence.has(digest):
            return f"event seq {seq}: cites evidence {digest[:12]} which is missing from raw/"
        if not ctx.evidence.check(digest):
            return f"event seq {seq}: evidence {digest[:12]} in raw/ was modified (hash differs)"
    return None


def check_projections(ctx: AuditContext) -> str | None:
    """Every projection file is today's rebuild from the ledger, or exactly what an older projection
    format wrote from it (a run made before an upgrade).

    An older format's file is a note, not a failure. Its bytes were recomputed here from this ledger
    by that format's rules (`projections.formats`, never a marker the file carries), so it says
    nothing the ledger does not; it is only in an older shape. Projections are derived: every verdict
    is recomputed from the ledger and the evidence whatever they hold. Failing it would make every
    upgrade fail the audit of every earlier run, which teaches readers to disregard this check or to
    `pw rebuild` before auditing, erasing the edits it is there to find. A file that matches neither
    today's format nor an older one's rendering of this ledger still fails."""
    found = compare(ctx.run.path, ctx.files)
    if found.older:
        by_version: dict[int, list[str]] = {}
        for name, version in found.older.items():
            by_version.setdefault(version, []).append(name)
        for version, names in sorted(by_version.items()):
            ctx.notes.append(f"projections: {', '.join(names)} in projection format {version}, exactly as it "
                             f"renders this ledger (this ProfileWeaver writes format {formats.FORMAT}: "
                             f"{formats.changed_since(version)}); `pw rebuild` refreshes them")
    return found.divergence


def check_stops(ctx: AuditContext) -> str | None:
    """Replay every look of every adaptive timing campaign from its recorded samples: each must have
    said what was recorded, and the campaign must have stopped where and why it says it did."""
    from ledger import events as ev
    from pw.rules.stopping import stop_divergence

    timings: dict[int, ev.TimingRecorded] = {}
    for env in ctx.events:
        if isinstance(env.data, ev.TimingRecorded):
            timings[env.seq] = env.data
            problem = stop_divergence(env.seq, env.data, timings)
            if problem is not None:
                return problem
    return None


def check_verdicts(ctx: AuditContext) -> str | None:
    """Recompute every judgement from the events before it (samples, profiles) and compare."""
    return first_verdict_divergence(ctx.events, ctx.evidence)


def first_verdict_divergence(events, evidence: EvidenceStore) -> str | None:
    from ledger import events as ev

    for i, env in enumerate(events):
        if not isinstance(env.data, (ev.VerdictReached, ev.WinnerConfirmed)):
            continue
        found = _judgement_divergence(events, i, evidence)
        if found is not None:
            return found
    return None


# Recomputing a paired analysis on another machine (another numpy, scipy or libm) can round the
# last bit of a float differently: 0.9585920655113694 recorded on the device machine came back
# ...696 here. A tampered sample moves the numbers by far more than this.
ANALYSIS_RTOL = 1e-9


def same_numbers(recorded, again, rtol: float = ANALYSIS_RTOL) -> bool:
    """Whether two decoded JSON values are the same, floats within `rtol` of each other (lists and
    tuples alike: a recomputed analysis holds tuples where the decoded one holds lists)."""
    if isinstance(recorded, float) or isinstance(again, float):
        if isinstance(recorded, bool) or isinstance(again, bool) or recorded is None or again is None:
            return type(recorded) is type(again) and recorded == again
        try:
            return math.isclose(float(recorded), float(again), rel_tol=rtol, abs_tol=0.0) or recorded == again
        except (TypeError, ValueError):
            return False
    if isinstance(recorded, dict) and isinstance(again, dict):
        return recorded.keys() == again.keys() and all(same_numbers(recorded[k], again[k], rtol) for k in recorded)
    if isinstance(recorded, (list, tuple)) and isinstance(again, (list, tuple)):
        return len(recorded) == len(again) and all(same_numbers(a, b, rtol) for a, b in zip(recorded, again))
    return recorded == again


def _judged_rules(events, i: int) -> int:
    """The gate rules the candidate's judgement ending at event `i` was made under: those of its
    last GatesEvaluated before `i` (events written before the field existed say 1)."""
    from ledger import events as ev
    from pw.rules.gates import GATE_RULES

    cid = events[i].data.id
    gates = next((e.data for e in reversed(events[:i]) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid),
                 None)
    return GATE_RULES if gates is None else gates.rules


def _rules_note(events, i: int) -> str:
    """Said beside a divergence of a judgement made under older gate rules: it was recomputed under
    those rules (every version stays callable), not under the ones this ProfileWeaver applies now."""
    from pw.rules.gates import GATE_RULES

    rules = _judged_rules(events, i)
    if rules == GATE_RULES:
        return ""
    return (f"; recomputed under gate rules v{rules}, the ones it was judged by (this ProfileWeaver applies "
            f"v{GATE_RULES} to new judgements; see pw/rules/gates.py GATE_RULES)")


def _judgement_divergence(events, i: int, evidence: EvidenceStore) -> str | None:
    """The first way the judgement ending at event `i` (a verdict or a confirmation) no longer
    follows from the events before it."""
    from ledger import events as ev
    from pw.app.judging import judge_recorded
    from pw.rules.gates import UnknownRules

    env = events[i]
    data = env.data
    # The judgement batch is [CandidateEvaluated, GatesEvaluated, VerdictReached] or
    # [GatesEvaluated?, WinnerConfirmed]: recompute from everything before the batch.
    start = i
    while start > 0 and isinstance(events[start - 1].data, (ev.CandidateEvaluated, ev.GatesEvaluated)) \
            and events[start - 1].data.id == data.id:
        start -= 1
    rules = _judged_rules(events, i)
    try:
        j = judge_recorded(events[:start], data.id, evidence, rules)
    except UnknownRules as exc:
        return f"candidate {data.id}: verdict at seq {env.seq} cannot be recomputed: {exc}"
    except Exception as exc:  # noqa: BLE001 - an audit reports, it does not crash
        return f"candidate {data.id}: verdict at seq {env.seq} cannot be recomputed ({exc})"
    recorded = (data.status, data.speedup, data.interval)
    again = (j.verdict.status, j.verdict.speedup, j.verdict.interval)
    if recorded != again:
        return (
            f"candidate {data.id}: verdict at seq {env.seq} no longer follows from the evidence "
            f"(recorded {data.status} {data.speedup}x {data.interval}; recomputed {j.verdict.status} "
            f"{j.verdict.speedup}x {j.verdict.interval})"
        )
    if isinstance(data, ev.VerdictReached) and data != j.verdict:
        # Same status and numbers, but the recorded event says something else (its reasons, or
        # whether the rejection is repairable): the whole event must follow.
        changed = [f for f in data.__struct_fields__ if getattr(data, f) != getattr(j.verdict, f)]
        return f"candidate {data.id}: verdict at seq {env.seq} no longer follows ({', '.join(changed)} differ)"
    gates_env = next((e for e in events[start:i] if isinstance(e.data, ev.GatesEvaluated)), None)
    if gates_env is not None and msgspec.json.encode(gates_env.data.gates) != msgspec.json.encode(j.gates.gates):
        changed = [a.name for a, b in zip(gates_env.data.gates, j.gates.gates) if a != b]
        return f"candidate {data.id}: gates at seq {gates_env.seq} no longer follow ({', '.join(changed)})"
    eval_env = next((e for e in events[start:i] if isinstance(e.data, ev.CandidateEvaluated)), None)
    if eval_env is not None and not same_numbers(eval_env.data.analysis, j.evaluated.analysis):
        return f"candidate {data.id}: paired analysis at seq {eval_env.seq} no longer follows from its samples"
    return None


def check_profiles(ctx: AuditContext) -> str | None:
    """Re-run each adapter's pure normalize on the stored raw bytes; compare with the recorded profile."""
    from ledger import events as ev
    from pw.workload.capture import renormalize

    captured = {}
    single: set[tuple[str, str, str]] = set()  # (target, adapter, sha) of one-capture profiles seen
    for env in ctx.events:
        data = env.data
        if isinstance(data, ev.TimingRecorded) and data.profiler is not None:
            problem = timed_runs_divergence(ctx, env.seq, data)
            if problem is not None:
                return problem
            single.update((label, data.profiler.adapter, r.profile) for label, runs in data.runs.items() for r in runs)
        elif isinstance(data, ev.ProfileCaptured):
            if data.reused_from is not None:  # reuse by hash: the source must hold the same executable and evidence
                source = captured.get((data.reused_from, data.adapter))
                if source is None or not data.executable_sha256 or \
                        source.executable_sha256 != data.executable_sha256 or source.artifacts != data.artifacts:
                    return (f"event seq {env.seq}: the {data.adapter} capture of {data.target} claims to reuse "
                            f"{data.reused_from}'s, which has no capture of the same executable and evidence before it")
            captured[(data.target, data.adapter)] = data
        elif isinstance(data, ev.ProfileNormalized) and data.parts:
            problem = _merged_divergence(ctx, env.seq, data, single)
            if problem is not None:
                return problem
        elif isinstance(data, ev.ProfileNormalized):
            single.add((data.target, data.adapter, data.profile_sha256))
            cap = captured.get((data.target, data.adapter))
            if cap is None:
                return f"event seq {env.seq}: profile of {data.target} has no capture before it"
            build_dir = str(ctx.run.path / "build" / data.target)
            again = renormalize(ctx.evidence, cap, build_dir)
            import hashlib

            if hashlib.sha256(again).hexdigest() != data.profile_sha256:
                return f"event seq {env.seq}: the {data.adapter} profile of {data.target} does not follow from its raw capture"
        elif isinstance(data, ev.ProfileImported):
            problem = _imported_divergence(ctx, env.seq, data)
            if problem is not None:
                return problem
    return None


def _imported_divergence(ctx: AuditContext, seq: int, data) -> str | None:
    """An imported profile (`pw import`) must follow from its stored artifacts by today's pure normalize."""
    import hashlib

    from pw.app.imports import renormalize_import

    try:
        again = renormalize_import(ctx.evidence, data)
    except (ValueError, KeyError) as exc:
        return f"event seq {seq}: the imported {data.adapter} profile of {data.target} cannot be renormalized ({exc})"
    if hashlib.sha256(again).hexdigest() != data.profile_sha256:
        return f"event seq {seq}: the imported {data.adapter} profile of {data.target} does not follow from its artifacts"
    return None


def timed_runs_divergence(ctx: AuditContext, seq: int, timing) -> str | None:
    """One kind of run: each timed run's profile must follow from its raw output (the adapter's pure
    normalize), and each per-run reduction (``{label}:hot_s``, ``{label}:reach_s``) from that profile,
    the run's wall time and the campaign's attribution (``pw.rules.attribution``)."""
    import hashlib

    from adapters.registry import adapter_by_name
    from ledger.profile import decode_profile, encode_profile
    from pw.app.campaign import LATER_SERIES, Profiling

    try:
        adapter = adapter_by_name(timing.profiler.adapter)
    except KeyError as exc:
        return f"event seq {seq}: its timed runs were profiled by {exc}"
    reduce = Profiling(timing.profiler.adapter, adapter, ctx.evidence, timing.attribution, timing.profiler.source_roots,
                       rule=timing.campaign.rule if timing.campaign is not None else None)
    for k, label in enumerate(timing.targets):
        role = "reference" if k == 0 else ("candidate" if label == timing.targets[-1] else "hybrid")
        walls = timing.samples.get(f"{label}:wall_s", [])
        for i, run in enumerate(timing.runs.get(label, [])):
            where = f"event seq {seq}: timed run {i + 1} of {label}"
            if not all(ctx.evidence.has(sha) for sha in [*run.raw.values(), run.profile]):
                continue  # the evidence check names what is missing
            try:
                artifacts = {role_: ctx.evidence.get(sha) for role_, sha in run.raw.items()}
                again = adapter.normalize(artifacts, timing.profiler.source_roots.get(label, ""), label)
            except (OSError, ValueError) as exc:
                return f"{where}: its profile cannot be recomputed from its raw output ({exc})"
            if hashlib.sha256(encode_profile(again)).hexdigest() != run.profile:
                return f"{where}: its profile does not follow from its raw output"
            if timing.attribution is None or i >= len(walls):
                continue
            _, series, _ = reduce.reduce_profile(decode_profile(ctx.evidence.get(run.profile)), role, walls[i])
            for key, value in series.items():
                if key in LATER_SERIES and f"{label}:{key}" not in timing.samples:
                    continue  # recorded before pw kept this series
                recorded = timing.samples.get(f"{label}:{key}", [])
                if i >= len(recorded) or not math.isclose(recorded[i], value, rel_tol=1e-9, abs_tol=1e-9):
                    got = recorded[i] if i < len(recorded) else None
                    return (f"{where}: {key} {got} does not follow from its profile and the campaign's "
                            f"attribution ({value})")
    return None


def _merged_divergence(ctx: AuditContext, seq: int, data, single: set) -> str | None:
    """A profile that sums several runs must sum exactly runs recorded before it, of its target."""
    import hashlib

    from ledger.profile import decode_profile, encode_profile, merge_profiles

    strays = [p[:12] for p in data.parts if (data.target, data.adapter, p) not in single]
    if strays:
        return (f"event seq {seq}: the merged {data.adapter} profile of {data.target} sums {', '.join(strays)}, "
                "which no earlier single-run profile of it recorded")
    try:
        merged = encode_profile(merge_profiles([decode_profile(ctx.evidence.get(p)) for p in data.parts]))
    except (ValueError, OSError) as exc:
        return f"event seq {seq}: the merged {data.adapter} profile of {data.target} cannot be recomputed ({exc})"
    if hashlib.sha256(merged).hexdigest() != data.profile_sha256:
        return f"event seq {seq}: the merged {data.adapter} profile of {data.target} does not follow from its parts"
    return None


def check_resolutions(ctx: AuditContext) -> str | None:
    """Replay how every reprofile was sized: the speedup it resolved follows from the campaign, and
    each look's samples, shares and decision follow from the recorded single-run profiles and the
    rule (``pw.rules.resolution``)."""
    from ledger import events as ev

    for i, env in enumerate(ctx.events):
        if isinstance(env.data, ev.ReprofileResolved):
            problem = _resolution_divergence(ctx, i, env.data)
            if problem is not None:
                return f"event seq {env.seq}: the reprofile of {env.data.target} {problem}"
    return None


def _resolution_divergence(ctx: AuditContext, i: int, r) -> str | None:
    from ledger import events as ev
    from ledger.profile import decode_profile, merge_profiles
    from projections.profile_diff import diff_profiles
    from pw.rules import judge
    from pw.rules import resolution as rz

    before = ctx.events[:i]
    verdict, speedup = judge.saving_to_resolve(before, r.target)
    if speedup != r.speedup:
        return f"resolved a speedup of {r.speedup}, but its campaign gives {speedup}"
    if r.stop == "not-needed":
        if verdict == "FASTER" and rz.target_band(speedup) is not None:
            return "recorded not-needed, but its campaign decided faster"
        return None
    if r.rule not in rz.RESOLUTION_RULES or r.fraction != rz.RESOLUTION_FRACTION:
        return (f"was sized by rule {r.rule!r} (fraction {r.fraction}), which this ProfileWeaver does not know "
                f"({', '.join(rz.RESOLUTION_RULES)}, fraction {rz.RESOLUTION_FRACTION})")
    if verdict != "FASTER":
        return f"grew to resolve a saving its campaign did not decide ({verdict})"
    hot = judge.select(before, r.target).hotspot
    if hot is None:
        return "was sized without a hotspot"
    known = {(e.data.target, e.data.profile_sha256) for e in before
             if isinstance(e.data, ev.ProfileNormalized) and not e.data.parts and e.data.adapter == r.adapter}
    for label, parts in ((r.reference, r.before_parts), (r.target, r.after_parts)):
        strays = [p[:12] for p in parts if (label, p) not in known]
        if strays:
            return f"cites {', '.join(strays)} as runs of {label}, which no single-run profile of it recorded"
    if r.rule in ("share-band/1", "share-band/2"):
        if r.min_runs != 1:
            return f"was sized by rule {r.rule!r}, which has no floor on the profiled runs, yet records {r.min_runs}"
    else:
        spread = judge.campaign_spread(before, r.target)
        floor = rz.min_runs_for(spread, r.max_runs)
        if (r.spread, r.min_runs) != (spread, floor):
            return (f"records a floor of {r.min_runs} profiled runs per side for a spread of {r.spread}, but its "
                    f"campaign's spread is {spread}, which gives {floor}")
    budget = rz.Budget(max_runs=r.max_runs, max_time_s=r.max_time_s, min_runs=r.min_runs)
    profiles = {}
    looks = []
    for k, recorded in enumerate(r.looks):
        try:
            bp = merge_profiles([profiles.setdefault(p, decode_profile(ctx.evidence.get(p)))
                                 for p in r.before_parts[:recorded.runs_before]])
            cp = merge_profiles([profiles.setdefault(p, decode_profile(ctx.evidence.get(p)))
                                 for p in r.after_parts[:recorded.runs_after]])
        except (ValueError, OSError) as exc:
            return f"look {k + 1} cannot be recomputed ({exc})"
        look = rz.look_of(diff_profiles(bp, cp, hotspot=hot[1].operation, metric=hot[1].metric),
                          recorded.runs_before, recorded.runs_after, recorded.elapsed_s)
        seen = (recorded.samples_before, recorded.samples_after, recorded.share_before, recorded.share_after)
        if look is None or (look.samples_before, look.samples_after, look.share_before, look.share_after) != seen:
            return f"look {k + 1} no longer follows from its profiles (recorded samples and shares {seen})"
        looks.append(look)
    problem = rz.replay_resolution(looks, [lk.decision for lk in r.looks], r.stop, speedup, budget, rule=r.rule)
    return None if problem is None else f"no longer stops where it did: {problem}"


def check_raw(ctx: AuditContext) -> str | None:
    """Every file under raw/ holds the bytes its name is the sha256 of, cited or not (a planted or
    edited file no event cites yet is still evidence someone could point to)."""
    root = ctx.evidence.root
    if not root.is_dir():
        return None
    for sub in sorted(root.iterdir()):
        if not sub.is_dir() or sub.is_symlink():
            return f"raw/{sub.name}: expected a directory of evidence files named by their sha256"
        for f in sorted(sub.iterdir()):
            name = f"raw/{sub.name}/{f.name}"
            if f.is_symlink() or not f.is_file():
                return f"{name}: expected a regular evidence file, found a link or something else"
            if len(f.name) != 64 or not set(f.name) <= set("0123456789abcdef") or not f.name.startswith(sub.name):
                return f"{name}: not named by a sha256 in its own directory"
            if not ctx.evidence.check(f.name):
                return f"{name}: its bytes no longer hash to its name (modified)"
    return None


def check_sources(ctx: AuditContext) -> str | None:
    """The baseline copy and every judged candidate's workspace still hash to what was recorded:
    the baseline to ``RunStarted.source_sha256``, a candidate to the ``source_sha256`` of the diff
    its latest verdict judged (its patch is raw evidence, checked above, and variants/<id>.patch a
    projection of it). A candidate whose latest verdict is a repairable rejection may be edited
    (a repair in progress): said in a note."""
    from ledger import events as ev
    from pw.workload import workspace

    started = next((e.data for e in ctx.events if isinstance(e.data, ev.RunStarted)), None)
    if started is not None:
        base = ctx.run.path / "baseline"
        problem = _tree_problem(base, started.source_sha256, workspace)
        if problem == _MISSING:
            _say(ctx, "sources", "baseline/ is missing: the run's source copy cannot be re-hashed")
        elif problem is not None:
            return f"baseline/ {problem} (RunStarted.source_sha256 {started.source_sha256[:12]})"
    prepared: dict[str, ev.CandidatePrepared] = {}
    judged: dict[str, tuple[int, ev.CandidateDiffRecorded, ev.VerdictReached]] = {}
    diffs: dict[str, tuple[int, ev.CandidateDiffRecorded]] = {}
    for env in ctx.events:
        d = env.data
        if isinstance(d, ev.CandidatePrepared):
            prepared[d.id] = d
        elif isinstance(d, ev.CandidateDiffRecorded):
            diffs[d.id] = (env.seq, d)
        elif isinstance(d, ev.VerdictReached) and d.id in diffs:
            judged[d.id] = (diffs[d.id][0], diffs[d.id][1], d)
    for cid, (seq, diff, verdict) in sorted(judged.items()):
        if diffs[cid][0] != seq or cid not in prepared:
            continue  # evaluated again since its last verdict: that attempt's own verdict will judge it
        ws = ctx.run.path / prepared[cid].workspace
        problem = _tree_problem(ws, diff.source_sha256, workspace)
        if problem is None:
            continue
        if problem == _MISSING:
            _say(ctx, "sources", f"candidate {cid}: {prepared[cid].workspace} is missing: what its "
                                 f"{verdict.status} verdict judged survives only as its patch in raw/")
            continue
        where = f"candidate {cid}: {prepared[cid].workspace} {problem}, not what its {verdict.status} verdict judged " \
                f"(source_sha256 {diff.source_sha256[:12]} at seq {seq})"
        if verdict.status == "rejected" and verdict.repairable:
            _say(ctx, "sources", f"{where}; a repair in progress (`pw evaluate` records what it judges next)")
            continue
        return where
    return None


_MISSING = "is missing"


def _say(ctx: AuditContext, check: str, text: str) -> None:
    """What a passing check adds to its "ok" line."""
    ctx.details[check] = f"{ctx.details[check]}; {text}" if check in ctx.details else f"ok; {text}"


def _tree_problem(root, recorded: str, workspace) -> str | None:
    if not root.is_dir():
        return _MISSING
    try:
        digest = workspace.tree_digest(root, workspace.source_files(root))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None if digest == recorded else "no longer hashes to it"


def check_anchor(ctx: AuditContext) -> str | None:
    """The ledger's history extends every head anchored for it outside the run directory
    (``ledger.anchor``: the log, and the heads given with ``--anchor``): a ledger rewritten and
    re-sealed since, by anyone who could write the run directory, no longer does."""
    from ledger import anchor

    heads = {env.seq: env.hash for env in ctx.events}
    logged = anchor.anchors_for(ctx.run.ledger_path)
    wanted = [(a.seq, a.hash, f"by `pw {a.command}` at {a.at} in {anchor.log_path()}") for a in logged]
    wanted += [(seq, digest, "given with --anchor") for seq, digest in ctx.printed]
    if not wanted:
        _say(ctx, "anchor", f"no head of this ledger is anchored in {anchor.log_path()} (a run made elsewhere, "
                            "or before anchors): give one pw printed with --anchor SEQ:HASH")
        return None
    problem = anchor.divergence(heads, wanted)
    if problem is None:
        last = max(wanted)
        _say(ctx, "anchor", f"extends {len(wanted)} anchored heads, the last at seq {last[0]}")
    return problem


CHECKS: list[tuple[str, Callable[[AuditContext], str | None]]] = [
    ("evidence", check_evidence),
    ("raw", check_raw),
    ("sources", check_sources),
    ("profiles", check_profiles),
    ("stops", check_stops),
    ("resolutions", check_resolutions),
    ("verdicts", check_verdicts),
    ("projections", check_projections),
    # Last: a ledger rewritten and re-sealed is named by what it says wrong first, where it says
    # anything wrong; a careful forger's (consistent everywhere) only here.
    ("anchor", check_anchor),
]


def audit_run(run: RunDir, printed: list[tuple[int, str]] = ()) -> AuditReport:
    ledger = Ledger(run.ledger_path)
    verified = ledger.verify()
    if not verified.ok:
        detail = verified.message
        results = [CheckResult("chain", False, detail)]
        first = f"chain: {detail}"
        # Say which verdicts the damaged ledger no longer supports, not only that it is damaged.
        verdict = first_verdict_divergence(ledger.read_lenient(), EvidenceStore(run.path / "raw"))
        if verdict is not None:
            results.append(CheckResult("verdicts", False, verdict))
            first = f"{first}; verdicts: {verdict}"
        return AuditReport(False, verified.head.seq, results, first)
    events = ledger.events()
    run_state = state.fold(events)
    evidence = EvidenceStore(run.path / "raw")
    files = documents.render(run_state)
    # Copies of evidence are compared where the evidence is there; a missing one is the evidence
    # check's finding, not a crash of the audit.
    files.update({name: evidence.get(sha) for name, sha in documents.evidence_copies(run_state).items()
                  if evidence.has(sha)})
    ctx = AuditContext(run, events, run_state, files, evidence, [], list(printed), {})
    results = [CheckResult("chain", True, f"{verified.events} events, hash chain intact")]
    first = None
    for name, check in CHECKS:
        noted = len(ctx.notes)
        problem = check(ctx)
        detail = problem or ctx.details.get(name) or ("ok" if len(ctx.notes) == noted else "ok (see note)")
        results.append(CheckResult(name, problem is None, detail))
        if problem is not None and first is None:
            first = f"{name}: {problem}"
    return AuditReport(first is None, verified.head.seq, results, first, list(ctx.notes))
