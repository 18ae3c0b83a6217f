"""The profile stage of `pw start`: route, capture, hotspot, source targets, mechanisms, brief.

Discovery and diagnosis are separate routing decisions, both recorded. Diagnosis climbs a rung
only when the profile below cannot answer (see `pw.rules.routing.escalate`), and again from that
rung's profile while it cannot answer either (at most `routing.MAX_CLIMBS`; climbs after the first
within `routing.CLIMB_BUDGET_S`), one recorded decision per climb. Costs use the overheads earlier
runs in the runs directory measured (`pw.app.overheads`), and every capture records its own.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from adapters.base import Usability
from adapters.registry import installed_specs
from ledger import events as ev
from ledger.profile import Profile
from pw.app.run import RunHandle
from pw.rules import hotspot as hs
from pw.rules import routing
from pw.workload import capture as profiling
from pw.workload.capture import language_of  # noqa: F401 - where callers found it
from pw.workload.steps import Target


def usability_from(preflight: ev.PreflightCompleted) -> dict[str, Usability]:
    return {
        p.name: Usability(usable=p.usable, reason=p.reason, version=p.version or "", mode=p.mode or "")
        for p in preflight.profilers
    }


def _routing_event(decision: routing.RoutingDecision) -> ev.RoutingDecided:
    return ev.RoutingDecided(
        phase=decision.phase,
        chosen=decision.chosen,
        reason=decision.reason,
        rejected=[ev.Rejection(adapter=r.adapter, reason=r.reason) for r in decision.rejected],
        needs=list(decision.needs),
        overheads=dict(decision.overheads),
    )


def baseline_runtime(state) -> float:
    for t in state.timings:
        if t.purpose == "baseline-variance" and t.samples.get("baseline"):
            return statistics.fmean(t.samples["baseline"])
    return 1.0


def timed_per_run(state) -> tuple[float | None, str | None, float | None]:
    """(the timed metric of one baseline run in seconds, what it is: "region" or "wall", the run's
    wall time in seconds): medians of the baseline-variance runs. A device-time hotspot's ceiling is
    of the first (``hotspot.select_hotspot``)."""
    timing = next((t for t in state.timings if t.purpose == "baseline-variance" and t.samples.get("baseline")), None)
    if timing is None:
        return None, None, None
    metric = statistics.median(timing.samples["baseline"])
    if state.run.contract.metric.kind == "roi":
        walls = timing.samples.get("baseline:wall_s") or []
        return metric, "region", (statistics.median(walls) if walls else None)
    return metric, "wall", metric


def _editable_files(state, target: Target) -> set[str]:
    from pw.rules.candidates import is_editable, protected_files

    contract = state.run.contract
    protected = protected_files(contract)
    return {f for f in target.files if is_editable(f, contract) and f not in protected}


def _answered_rung(decision: routing.RoutingDecision, profile: Profile) -> routing.RoutingDecision:
    """The decision at the finest rung the captured profile answers, not just the rung it was asked.

    A discovery that fell back to callgrind already holds exact per-line instruction counts; judged as
    a sampling rung it has "0 samples per line" and would capture the same counts a second time.
    """
    have = routing.rung_for([*profile.granularity, *profile.metrics])
    order = [r.name for r in routing.LADDER]
    if decision.rung in order and order.index(have.name) > order.index(decision.rung):
        return msgspec.structs.replace(decision, rung=have.name)
    return decision


def profile_stage(handle: RunHandle, state, target: Target, progress: Callable[[str], None]) -> list[ev.Payload]:
    """Discovery, the diagnosis climbs from it, the hotspot, then its source targets and the brief."""
    from projections.overhead import timed_wall
    from pw.app.overheads import factors_for

    contract = state.run.contract
    language = language_of(contract.run.argv, contract.source.editable)
    usable = usability_from(state.preflight)
    runtime = baseline_runtime(state)
    specs = installed_specs()
    overheads = factors_for(handle.path, runtime)  # measured by earlier runs in this runs directory
    router = _Router(language, runtime, specs, usable, overheads)
    timed = timed_wall(state.timings, "baseline", contract.metric.kind)
    exe = profiling.executable_digest(contract, target)

    discovery = router.route("discovery", routing.discovery_needs(language))
    events: list[ev.Payload] = [_routing_event(discovery)]
    if discovery.chosen is None:
        return events + [_unusable(discovery.reason)]
    # Timing and the oracle used the user's build; the profile may use a second one with -g.
    dbg = _debug_build(handle, contract, target, language, progress)
    capturer = _Capturer(handle, contract, dbg.target if dbg is not None and dbg.target is not None else target,
                         dbg, timed, exe)
    progress(f"profile: {discovery.chosen}")
    found = capturer.capture(discovery.chosen)
    events += [found.captured, found.normalized]
    editable = _editable_files(state, target)
    per_run, of, wall = timed_per_run(state)
    hot = _hotspot(state, found.profile, editable, discovery.chosen, runtime)
    if isinstance(hot, ev.FaultRecorded):
        return events + [hot]
    hot = _with_kernel_file(hot, found.profile, handle.path / "baseline", editable)
    climbed, profile_for_lines, gpu = _climb(router, capturer, handle, target, discovery, found.profile, hot, progress)
    events += climbed
    device = {"findings": hs.device_findings(found.profile, hot, per_run_s=per_run, of=of, wall_s=wall),
              "region": hs.region_check(found.profile, per_run if of == "region" else None)}
    rest = source_and_brief(handle, state, target, hot, found.profile, profile_for_lines, discovery.chosen, gpu,
                            build=dbg, extra={k: v for k, v in device.items() if v} or None)
    return events + [_with_definition_range(hot, rest)] + rest


@dataclass(frozen=True)
class _Router:
    """What every routing decision of the profile stage reads: the program's language, the
    baseline's run time, the installed adapters, which of them preflight found usable, and the
    overheads earlier runs measured."""

    language: str
    runtime: float
    specs: list
    usable: dict[str, Usability]
    overheads: dict[str, float]

    def route(self, phase: str, needs, **kw) -> routing.RoutingDecision:
        return routing.route(phase, needs, self.runtime, self.specs, self.usable, self.language,
                             overheads=self.overheads, **kw)


@dataclass(frozen=True)
class _Capturer:
    """Captures one adapter's profile of the profiled build (the -g build when there is one), with
    its overhead against the timed runs and the profiling build's note on it."""

    handle: RunHandle
    contract: object
    target: Target
    dbg: object | None
    timed: float | None
    exe: str | None

    def capture(self, adapter: str, **kw) -> profiling.ProfileResult:
        got = profiling.capture(self.contract, self.target, adapter, self.handle.evidence,
                                self.handle.path / "scratch", **kw)
        got = profiling.measured(got, self.timed, self.exe)
        if self.dbg is not None:
            got = msgspec.structs.replace(got, captured=msgspec.structs.replace(got.captured, build_note=self.dbg.note))
        return got


def _unusable(message: str) -> ev.FaultRecorded:
    return ev.FaultRecorded(stage="profile", target="baseline", failure_class="profiler-unusable", message=message)


def _debug_build(handle: RunHandle, contract, target: Target, language: str, progress: Callable[[str], None]):
    """The -g build a native program is profiled in (None for other languages)."""
    if language != "native":
        return None
    from pw.workload import debug_build

    progress("profile: checking the build for debug info")
    return debug_build.make(contract, target, handle.evidence, handle.logs, handle.path / "scratch")


def _hotspot(state, profile: Profile, editable: set[str], adapter: str, runtime: float):
    """The hotspot the manifest names (metric.operation) or the profile's largest editable one; a
    fault when there is none."""
    contract = state.run.contract
    named = contract.metric.operation if contract.metric.kind == "operation" else None
    per_run, of, _ = timed_per_run(state)
    try:
        return hs.select_named(profile, named) if named else \
            hs.select_hotspot(profile, editable, per_run_s=per_run, of=of)
    except ValueError as exc:
        if named:
            return _unusable(f"metric.operation: {exc}; name a function or kernel the "
                             "program runs (the brief lists the largest)")
        # A program that ends before the profiler can sample it has no hotspot to speak of.
        return _unusable(f"{adapter} recorded no cost in a {runtime:.3g} s run: the program is too short to "
                         "profile; give it a larger input in profileweaver.json")


def _with_kernel_file(hot, profile: Profile, root, editable: set[str]):
    """A timeline knows kernels by name only: find the editable file that defines the kernel, so
    the locator can slice its source for the brief."""
    hot_op = profile.operation(hot.operation)
    if hot.file is None and hot_op is not None and hot_op.kind == "kernel":
        where = kernel_file(root, sorted(editable), hot.name)
        if where is not None:
            return msgspec.structs.replace(hot, file=where)
    return hot


def _climb(router: _Router, capturer: _Capturer, handle: RunHandle, target: Target,
           discovery: routing.RoutingDecision, found: Profile, hot, progress: Callable[[str], None]):
    """(events, the profile the hot lines come from, the GPU finding or None): climb while each
    rung's profile cannot answer: perf -> callgrind -> callgrind-cachesim, each climb its own
    recorded decision; every climb after the first must fit the climb budget."""
    events: list[ev.Payload] = []
    profile_for_lines: Profile = found
    gpu: dict | None = None
    at, at_profile, spent = _answered_rung(discovery, found), found, 0.0
    for climb in range(routing.MAX_CLIMBS):
        step = routing.escalate(at, at_profile, hot.operation)
        if step.to_rung is None:
            if climb == 0:
                events.append(ev.RoutingDecided(phase="diagnosis", chosen=None, reason=f"no escalation: {step.reason}",
                                                rejected=[], needs=list(step.needs)))
            if step.reason.startswith("launch-bound"):  # the timeline's answer is the finding itself
                gpu = {"timeline": step.reason}
            break
        budget = None if climb == 0 else routing.CLIMB_BUDGET_S - spent
        diagnosis = router.route("diagnosis", step.needs, rung=step.to_rung, budget_s=budget)
        decided = _routing_event(diagnosis)
        events.append(msgspec.structs.replace(decided, reason=f"{step.reason} -> {diagnosis.reason}"))
        if diagnosis.chosen is None:
            break
        if climb:
            spent += diagnosis.estimated_cost_s or 0.0
        progress(f"diagnose: {diagnosis.chosen}")
        hot_op = found.operation(hot.operation)
        focus = (hot.name, int(hot_op.self_metrics.get("kernel_launches", 0))) if hot_op is not None else None
        deep = capturer.capture(diagnosis.chosen, focus=focus)
        events += [deep.captured, deep.normalized]
        if diagnosis.chosen == "ncu":
            # The roofline's program ceiling through the same share as the Amdahl ceiling's (of
            # the region or the run), so the brief's two ceilings cannot disagree.
            gpu = ncu_view(handle, deep.captured, hot.ceiling_share if hot.ceiling_share is not None else hot.share)
        # callgrind charges inlined code to the caller (kernel_gemm's loop as main's lines):
        # move those line costs to the function whose definition holds them.
        deep_profile = hs.reattribute_inlined(deep.profile, _definitions(target.src_dir, deep.profile))
        if deep_profile.operation(hot.operation) is None:
            break
        profile_for_lines = deep_profile
        at, at_profile = _answered_rung(diagnosis, deep_profile), deep_profile
    return events, profile_for_lines, gpu


def _with_definition_range(hot, rest: list[ev.Payload]):
    """The hotspot with the parser's definition range, not just the sampled lines (and the file,
    when the profile knew only the symbol: found by the parsers)."""
    located = next((e for e in rest if isinstance(e, ev.SourceTargetsEmitted)), None)
    for t in (located.document.get("targets", []) if located else []):
        if t.get("role") == "hotspot":
            return msgspec.structs.replace(hot, file=hot.file or t["file"], line_start=t["line_start"],
                                           line_end=t["line_end"])
    return hot


def kernel_file(root, editable: list[str], name: str) -> str | None:
    """The editable file holding ``__global__ ... NAME(`` (NAME: the kernel's last identifier), if one does."""
    base = re.split(r"[<(]", name, maxsplit=1)[0].rsplit("::", 1)[-1].strip()
    if not base:
        return None
    pattern = re.compile(rf"__global__[^;{{}}]*?\b{re.escape(base)}\s*(<[^;{{}}]*>)?\s*\(")
    for rel in editable:
        path = root / rel
        if path.is_file() and pattern.search(path.read_text(errors="replace")):
            return rel
    return None


def ncu_view(handle: RunHandle, captured: ev.ProfileCaptured, share: float) -> dict | None:
    """The Nsight Compute diagnostic and roofline of the profiled kernel, from the stored raw CSVs
    (what `pw inspect --section ncu` shows and the brief's limiter line)."""
    from adapters import ncu

    arts = {role: handle.evidence.get(sha) for role, sha in captured.artifacts.items()
            if role in (ncu.RAW_ROLE, ncu.DETAILS_ROLE)}
    return gpu_summary(arts, share)


def gpu_summary(arts: dict[str, bytes], share: float) -> dict | None:
    """Pure half of ``ncu_view``: the diagnostic and roofline of the last profiled launch."""
    from adapters import ncu

    diags = ncu.diagnose_artifacts(arts)
    if not diags:
        return None
    d = diags[-1]
    rf = ncu.roofline(ncu.parse_raw_csv(arts[ncu.RAW_ROLE].decode(errors="replace"))[-1], share=share)
    return {"kernel": d.operation.rsplit("@", 1)[0], "limiter": d.limiter, "occupancy_limiter": d.occupancy_limiter,
            "groups": {**d.groups, "stalls": {**d.groups.get("stalls", {})}},
            "rules": [msgspec.to_builtins(r) for r in d.rules[:8]], "roofline": msgspec.to_builtins(rf),
            "missing": d.missing}


_CODE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cu", ".cuh", ".py", ".mk", "Makefile")


_BUILD_FILES = ("Makefile", "makefile", "GNUmakefile", "CMakeLists.txt")


def _never_editable(files: list[str], editable: set[str], limit: int = 4) -> list[str]:
    """The code around the workload that must not change: its own harness and build files, and the
    shared code outside it folded to its top directory (`utilities/*`, `config.mk`). Sibling
    workloads of a suite are not listed."""
    own_dirs = {f.rsplit("/", 1)[0] if "/" in f else "" for f in editable}
    # Directories with their own build file (other than the workload's) are other workloads.
    builds = {f.rsplit("/", 1)[0] for f in files if "/" in f and f.rsplit("/", 1)[1] in _BUILD_FILES}
    out: list[str] = []
    for f in files:
        if f in editable or not (f.endswith(_CODE_SUFFIXES) or f.endswith("CMakeLists.txt")):
            continue
        folder = f.rsplit("/", 1)[0] if "/" in f else ""
        top = f.split("/", 1)[0]
        if folder in own_dirs:
            item = f
        elif any(d == top or d.startswith(top + "/") for d in own_dirs) or \
                any(folder == b or folder.startswith(b + "/") for b in builds - own_dirs):
            continue
        else:
            item = f"{top}/*" if "/" in f else f
        if item not in out:
            out.append(item)
    return out[:limit]


_DEFINE = re.compile(r"(?:^|\s)-D\s?([A-Za-z_][A-Za-z0-9_]*)")
_COMPILE = re.compile(r"(?:^|[\s/])(?:cc|gcc|clang|c\+\+|g\+\+|clang\+\+)(?:-\d+)?\s")


def build_defines(logs) -> frozenset[str] | None:
    """Macro names the baseline's compile commands define (`-DNAME`), read from its build logs;
    None when no compile command was echoed (a quiet CMake build): then nothing is assumed."""
    names: set[str] = set()
    seen = False
    for log in sorted(logs.glob("build-baseline-*.out")) + sorted(logs.glob("build-baseline-*.err")):
        for line in log.read_text(errors="replace").splitlines():
            if _COMPILE.search(line):
                seen = True
                names.update(_DEFINE.findall(line))
    return frozenset(names) if seen else None


def locate_symbol(root, files: list[str], contract, name: str, defines):
    """Source targets for a hotspot known by its symbol only: the first editable file whose parse
    defines a function of that name (C family and Python)."""
    from ledger.errors import InputError
    from pw.agent.source.locator import locate
    from pw.rules.candidates import is_editable

    for rel in files:
        if not is_editable(rel, contract) or not rel.endswith((".c", ".cc", ".cpp", ".cxx", ".cu", ".py")):
            continue
        try:
            return locate(root, list(contract.source.editable), rel, name, [], defines=defines)
        except InputError:
            continue
    return None


def _definitions(root, profile: Profile) -> dict[str, list[tuple[str, int, int]]]:
    """(name, first line, last line) of every function the parser finds in the C-family files the
    profile has line costs in."""
    from pw.agent.source import c_family

    out: dict[str, list[tuple[str, int, int]]] = {}
    for rel in sorted({lc.file for lc in profile.lines}):
        path = root / rel
        if c_family.language_of(rel) is None or not path.is_file():
            continue
        try:
            index, _ = c_family.parse_file(rel, path.read_bytes())
        except (ValueError, OSError):
            continue
        out[rel] = [(f.name, f.line_start, f.line_end) for f in index.functions]
    return out


def _line_shares(profile: Profile, op_id: str) -> list[dict]:
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0) or 1.0
    lines = sorted(profile.lines_of(op_id), key=lambda lc: (-lc.self_metrics.get(metric, 0.0), lc.line))
    return [{"line": lc.line, "share": round(lc.self_metrics.get(metric, 0.0) / total, 4)} for lc in lines[:8]]


def _evidence_text(e: dict) -> str:
    """One measured fact or metric, short: `strided B @ matmul.c:20` or `d1_miss_rate=0.31`."""
    if e["kind"] == "fact":
        return f"{e['name']} @ {e['where']}"
    value = e.get("value")
    return f"{e['name']}={value:.3g}" if isinstance(value, (int, float)) else e["name"]


def source_and_brief(handle, state, target, hot, discovery: Profile, line_profile: Profile, adapter: str,
                     gpu: dict | None = None, build=None,
                     *, label: str = "baseline", slices_dir: str = "source-slices/", extra: dict | None = None):
    """Source targets, slices and the agent brief for `label`'s tree (the baseline at start; the
    current best after a verified candidate, with `extra` numbers saying which and how fast)."""
    from pw.agent.brief import render_brief
    from pw.agent.tokens import TOKENIZER, count_tokens

    line_shares = _line_shares(line_profile, hot.operation)
    located = _locate_hotspot(handle, state, target, hot, line_shares)
    mech_dicts = _ranked_mechanisms(located, hot, line_profile, line_shares)
    out: list[ev.Payload] = []
    slices_info = []
    if located is not None:
        targets, slices_info = _source_targets(located, mech_dicts, label=label, slices_dir=slices_dir)
        out.append(targets)
    numbers = _brief_numbers(handle, state, target, hot, discovery, adapter, line_shares, mech_dicts, located,
                             slices_info, gpu, build)
    numbers.update(extra or {})
    if label != "baseline":
        numbers["slices_dir"] = slices_dir
    text, tokens = render_brief(numbers, count_tokens)
    view = _agent_view(adapter, discovery, line_shares, mech_dicts, located, gpu)
    costs = {"agent-brief.txt": tokens,
             "agent-view.json": count_tokens(msgspec.json.encode(view).decode())}
    for name, body in (out[0].slices.items() if out else []):
        costs[name] = count_tokens(body)
    out.append(ev.BriefEmitted(target=label, text=text, tokens=tokens, tokenizer=TOKENIZER,
                               numbers=numbers, view=view, costs=costs))
    return out


def _locate_hotspot(handle, state, target, hot, line_shares: list[dict]):
    """The hotspot's source ranges in the tree, by its file and hot lines; by its symbol when the
    profile had no line info; None when neither is known."""
    from pw.agent.source.locator import locate

    contract = state.run.contract
    hot_lines = sorted(h["line"] for h in line_shares)
    defines = build_defines(handle.logs)
    if hot.file and (target.src_dir / hot.file).is_file():
        return locate(target.src_dir, list(contract.source.editable), hot.file, hot.name, hot_lines,
                      defines=defines)
    if not hot.file:
        # No line info (no debug info could be had): find the symbol's definition with the parsers.
        return locate_symbol(target.src_dir, target.files, contract, hot.name, defines)
    return None


def _brief_numbers(handle, state, target, hot, discovery: Profile, adapter: str, line_shares: list[dict],
                   mech_dicts: list[dict], located, slices_info, gpu: dict | None, build) -> dict:
    """Every number the brief renders, in the order it renders them."""
    from pw.rules.candidates import is_editable, protected_files
    from pw.workload.differential import short_statement

    run = state.run
    contract = run.contract
    probe = next((p for p in state.preflight.profilers if p.name == adapter), None)
    variance = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    xs = variance.samples["baseline"] if variance else []
    mean = statistics.fmean(xs) if xs else 0.0
    cv = statistics.stdev(xs) / mean if len(xs) > 1 and mean > 0 else None
    protected = protected_files(contract)
    editable = [f for f in target.files if is_editable(f, contract) and f not in protected]
    numbers = {
        "run_id": run.run_id, "run_dir": str(handle.path), "workload": contract.name,
        "metric": f"{contract.metric.kind} time", "baseline_mean_s": round(mean, 6), "baseline_runs": len(xs),
        "baseline_cv": round(cv, 6) if cv is not None else None,
        "oracle": short_statement(contract, state.oracles.get("baseline"), _oracle_vary(handle, state)),
        "holdouts": bool(contract.oracle.holdout or contract.oracle.generators),
        "adapter": adapter, "adapter_mode": probe.mode if probe else None,
        "hotspot": {"name": hot.name, "file": hot.file, "line_start": hot.line_start, "line_end": hot.line_end,
                    "share": hot.share, "metric": hot.metric, "ceiling": hot.amdahl_ceiling,
                    "span_share": hot.span_share, "operation": hot.operation,
                    **({"ceiling_of": hot.ceiling_of, "ceiling_share": hot.ceiling_share} if hot.ceiling_of else {})},
        "hot_lines": line_shares,
        "mechanisms": [{"id": m["id"], "score": round(m["score"], 3), "description": m["description"],
                        "evidence": [_evidence_text(e) for e in m["evidence"] if e["kind"] == "fact"][:2]}
                       for m in mech_dicts],
        "slices": slices_info,
        "time_split": _time_split(state, discovery),
        "profiling_build": None if build is None else {"note": build.note, "same_code": build.same_code},
        "frontier": located.frontier_lines() if located else [],
        "editable": editable,
        "never_editable": _never_editable(target.files, set(editable)),
    }
    if gpu is not None:
        numbers["gpu"] = _gpu_numbers(gpu)
    if located is not None:
        hot_target = next((t for t in located.targets if t.role == "hotspot"), None)
        if hot_target is not None:  # the definition range from the parser, not the sampled lines
            numbers["hotspot"].update(file=numbers["hotspot"]["file"] or hot_target.file,
                                      line_start=hot_target.line_start, line_end=hot_target.line_end)
        # Point the agent at the hot ranges first.
        focus_files = [t.file for t in located.targets if t.editable]
        numbers["editable"] = sorted(set(editable), key=lambda f: (f not in focus_files, f))
    beside = largest_beside(discovery, hot, set(editable))
    if beside is not None and contract.metric.kind != "operation":
        numbers["beside"] = beside
    if contract.metric.kind == "operation":
        numbers["metric"] = f"{contract.metric.operation} time"
        numbers["judged_on"] = contract.metric.operation
    return numbers


def _gpu_numbers(gpu: dict) -> dict:
    """The brief's GPU line: the timeline's finding, or the counters' kernel, limiter and ceilings."""
    if "timeline" in gpu:
        return {"timeline": gpu["timeline"]}
    rf = gpu["roofline"]
    return {"kernel": gpu["kernel"], "limiter": gpu["limiter"], "bound": rf.get("bound"),
            "kernel_ceiling": rf.get("kernel_ceiling"), "program_ceiling": rf.get("program_ceiling")}


# A hotspot whose name says it sets up the data: the run's cost is not what the user optimises.
_SET_UP = re.compile(r"(?:^|_)(?:init|initiali[sz]e|setup|set_up|fill|load|read|generate|gen|rand|random|alloc|"
                     r"prepare|populate)(?:_|$|[A-Z0-9])", re.IGNORECASE)


def largest_beside(profile: Profile, hot, editable: set[str]) -> dict | None:
    """When the hotspot looks like initialisation (``_SET_UP``), the largest other function of an
    editable file (at least 5% of the profile): what the user may rather judge a campaign on."""
    if not _SET_UP.search(hot.name):
        return None
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0)
    others = [o for o in profile.operations if o.id != hot.operation and o.file in editable]
    if not others or total <= 0:
        return None
    best = max(others, key=lambda o: (o.self_metrics.get(metric, 0.0), o.id))
    share = best.self_metrics.get(metric, 0.0) / total
    return {"name": best.name, "share": round(share, 6)} if share >= 0.05 else None
def _oracle_vary(handle, state) -> dict[str, list[int]]:
    """The lines the baseline's inferred oracle set aside as varying (from its stored bundle)."""
    from pw.workload.compare import decode_streams, is_bundle

    oracle = state.oracles.get("baseline")
    if oracle is None or not oracle.output_sha256 or not handle.evidence.has(oracle.output_sha256):
        return {}
    stored = handle.evidence.get(oracle.output_sha256)
    return dict(decode_streams(stored).vary) if is_bundle(stored) else {}


def _time_split(state, discovery: Profile) -> dict:
    """User vs kernel time: from the profile's kernel frames where it sampled the kernel, else from
    the kernel's accounting of the baseline's timed runs (an unprivileged perf sees user space only)."""
    split = hs.time_split(discovery)
    if split["kernel"] > 0:
        return split
    timing = next((t for t in state.timings if t.purpose == "baseline-variance"), None)
    if timing is None:
        return split
    accounted = hs.accounted_split(list(timing.samples.get("baseline:user_s", [])),
                                   list(timing.samples.get("baseline:sys_s", [])))
    return accounted if accounted is not None else split


def _ranked_mechanisms(located, hot, line_profile: Profile, line_shares: list[dict]) -> list[dict]:
    """The mechanism catalog ranked against the hotspot's source facts and its measured metrics."""
    from pw.rules.mechanisms import rank_mechanisms

    measurements: dict = {"hotspot_share": hot.share, "hotspot_symbol": hot.name,
                          "line_shares": {h["line"]: h["share"] for h in line_shares}}
    op = line_profile.operation(hot.operation)
    if op is not None:
        measurements.update({k: v for k, v in op.self_metrics.items()})
    mechanisms = rank_mechanisms(located.facts if located else [], measurements)
    return [msgspec.to_builtins(m) for m in mechanisms]


def _source_targets(located, mech_dicts: list[dict], *, label: str = "baseline",
                    slices_dir: str = "source-slices/") -> tuple[ev.SourceTargetsEmitted, list[dict]]:
    """The located targets (of `label`'s tree) as an event with their slices under stable file names
    in `slices_dir`, and the brief's list of those slices."""
    doc = msgspec.to_builtins(located)
    # Stable, shell-friendly file names in the locator's priority order: 01-hotspot-matmul.txt
    names: dict[str, str] = {}
    slices_info = []
    for t in located.targets:
        if t.slice and t.slice not in names:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{t.role}-{t.symbol}").strip("-")[:48]
            names[t.slice] = f"{slices_dir}{len(names) + 1:02d}-{stem}.txt"
            slices_info.append({"path": names[t.slice], "range": f"{t.file}:{t.line_start}-{t.line_end}",
                                "role": t.role, "symbol": t.symbol})
    slices = {names[k]: text for k, text in located.slices.items() if k in names}
    event = ev.SourceTargetsEmitted(
        target=label, document=doc, slices=dict(sorted(slices.items())),
        frontier=located.frontier_lines(), mechanisms=mech_dicts,
        editable=sorted({t.file for t in located.targets if t.editable}),
    )
    return event, slices_info


def _agent_view(adapter: str, discovery: Profile, line_shares: list[dict], mech_dicts: list[dict], located,
                gpu: dict | None = None) -> dict:
    """What `pw inspect` shows beyond the brief: the discovery profile's top, lines, mechanisms, facts."""
    return {
        "profile": {"adapter": adapter, "tool": discovery.tool, "tool_version": discovery.tool_version,
                    "totals": discovery.totals,
                    "top": [{"id": o.id, "self": o.self_metrics, "inclusive": o.inclusive_metrics,
                             "file": o.file, "lines": [o.line_start, o.line_end]}
                            for o in discovery.top_operations(15)]},
        "lines": line_shares,
        "mechanisms": mech_dicts,
        "facts": [msgspec.to_builtins(f) for f in (located.facts if located else [])],
        "omitted": list(located.omitted) if located else [],
        **({"ncu": gpu} if gpu is not None and "roofline" in gpu else {}),
    }
