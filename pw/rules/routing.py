"""Profiler routing: pick the cheapest adapter that can run here and answer the question (pure).

``route`` filters adapters by preconditions (probed usable, applies to the program's language, serves
the phase), then by insight (provides every needed granularity and metric), then sorts by cost
(``overhead_factor * runtime + setup + rebuild``) and records why every other adapter lost.
Discovery ("where does time go?") and diagnosis ("why is this operation slow?") are routed by
separate calls and give separate decisions.

``escalate`` climbs the ``LADDER`` one rung, and only when the current rung's profile cannot answer
(e.g. sampling put too few samples on each line of the hot function to rank its lines). A GPU rung is
reached only on evidence in the profile (the CPU hotspot is CUDA runtime/driver code), never merely
because the program uses CUDA. The caller climbs again from each new rung's profile while that rung
cannot answer either (perf -> callgrind -> callgrind-cachesim), at most ``MAX_CLIMBS`` rungs; every
climb after the first must fit ``CLIMB_BUDGET_S`` of estimated cost (``route(budget_s=...)``).

Costs use an adapter's *measured* overhead (profiled wall / uninstrumented timed wall, recorded on
each capture and folded by ``projections.overhead``, which keeps only captures of programs within 2x
of this one's length) once one exists, else its declared ``overhead_factor``; the decision records
which measured factors it used.

GPU programs: discovery is the timeline (``discovery_needs("cuda")``: kernels and device time, which
the CUPTI and Nsight Systems adapters serve). Kernel counters (Nsight Compute, rung
``kernel-counters``) are reached only by escalation, when the timeline named a kernel as the hotspot
and the question is why that kernel is slow: not when the device mostly idles between short
kernels (launch-bound), where no counter inside a kernel explains the time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import msgspec

from adapters.base import PHASES, AdapterSpec, Usability
from ledger.metrics import KNOWN_METRICS
from ledger.profile import GRANULARITIES, Profile


class Rung(msgspec.Struct, frozen=True):
    """One step of the coarse-to-fine ladder: what it needs from an adapter and what it answers."""

    name: str
    needs: list[str]
    question: str
    targets: list[str] = []  # empty: any language


LADDER: tuple[Rung, ...] = (
    Rung("process-time", ["process"], "How long does the whole program take?"),
    Rung("function-sampling", ["function", "cpu_time_s"], "Which functions take the CPU time?"),
    Rung("line-exact", ["line", "instructions"], "Which source lines execute the work, exactly?"),
    Rung("counters", ["line", "ll_misses"], "Is the hot line bound by the memory hierarchy?"),
    Rung("gpu-kernel", ["kernel", "gpu_time_ns"], "Which GPU kernels take the device time?", ["cuda"]),
    Rung("gpu-timeline", ["timeline", "gpu_time_ns"],
         "Where do host and device wait on each other?", ["cuda"]),
    Rung("kernel-counters", ["kernel", "sm_throughput_pct"],
         "Why is this kernel slow: memory, occupancy, stalls or compute?", ["cuda"]),
)
GPU_RUNGS = ("gpu-kernel", "gpu-timeline", "kernel-counters")
RUNGS: dict[str, Rung] = {r.name: r for r in LADDER}

# Escalation thresholds (defaults; callers may pass their own).
MAX_SPAN_LINES = 40        # a hot function wider than this needs line-level attribution
MIN_SAMPLES_PER_LINE = 25  # fewer samples per line of the observed span: line shares are noise (±20%)
MAX_CLIMBS = 3             # rungs one diagnosis may climb above discovery
CLIMB_BUDGET_S = 30.0      # estimated seconds every climb after the first may add, all together
REPROFILE_BUDGET_S = 30.0  # estimated seconds a candidate's diagnosis-adapter reprofile may take

_GPU_MODULE = re.compile(r"^lib(cuda|cudart|nvidia|nvrtc|cublas|cudnn|nccl)", re.IGNORECASE)
_GPU_NAME = re.compile(r"^(cuda|cu)[A-Z]\w*|^cudaDeviceSynchronize$")


def discovery_needs(language: str) -> list[str]:
    """What discovery asks for: the GPU timeline for CUDA programs, functions for everything else."""
    return ["gpu_time_ns", "kernel", "timeline"] if language == "cuda" else ["function"]


class Rejected(msgspec.Struct, frozen=True):
    adapter: str
    reason: str


class RoutingDecision(msgspec.Struct, frozen=True, kw_only=True):
    phase: str
    rung: str
    needs: list[str]
    language: str
    runtime_s: float
    chosen: str | None
    reason: str
    estimated_cost_s: float | None = None
    rejected: list[Rejected] = []
    overheads: dict[str, float] = {}  # measured overhead factors the costs used (declared otherwise)


class Escalation(msgspec.Struct, frozen=True, kw_only=True):
    """Whether to climb: ``to_rung`` None means the current rung answered (``reason`` says how)."""

    phase: str
    from_rung: str
    to_rung: str | None
    needs: list[str]
    hotspot: str
    reason: str


def rung_for(needs: Iterable[str]) -> Rung:
    """The finest rung whose needs are all in ``needs`` (else matched on granularity alone)."""
    have = set(needs)
    full = [r for r in LADDER if set(r.needs) <= have]
    if full:
        return full[-1]
    gran = [r for r in LADDER if {n for n in r.needs if n in GRANULARITIES} <= have]
    return gran[-1] if gran else LADDER[0]


def _check_needs(needs: Iterable[str]) -> list[str]:
    out = sorted(set(needs))
    bad = [n for n in out if n not in GRANULARITIES and n not in KNOWN_METRICS]
    if bad:
        raise ValueError(f"unknown needs {bad}; expected granularities {list(GRANULARITIES)} "
                         f"or metric ids {sorted(KNOWN_METRICS)}")
    return out


def _insight_gaps(spec: AdapterSpec, needs: list[str]) -> list[str]:
    gaps = [f"no {n} granularity" for n in needs if n in GRANULARITIES and n not in spec.granularity]
    gaps += [f"does not measure {n}" for n in needs if n not in GRANULARITIES and n not in spec.measures]
    return gaps


def overhead_of(spec: AdapterSpec, overheads: Mapping[str, float] | None = None) -> float:
    """The overhead factor routing uses: the measured one once it exists, else the declared default."""
    measured = (overheads or {}).get(spec.name)
    return measured if measured is not None and measured > 0 else spec.overhead_factor


def claimable_gates(spec: AdapterSpec, gate_names: Iterable[str]) -> dict[str, str]:
    """Each gate -> what this adapter's evidence can do for it: "open" (the adapter takes no gate off
    the table; the gate still needs its own evidence) or "never: <why>" (its declared limit). Routing
    and the briefs read this, so no child is credited with a gate it cannot pass."""
    return {g: (f"never: {spec.gate_limits[g]}" if g in spec.gate_limits else "open") for g in gate_names}


def estimated_cost(spec: AdapterSpec, runtime_s: float, overheads: Mapping[str, float] | None = None,
                   build_s: float = 0.0) -> float:
    """``spec.cost_s``, or with a measured factor ``measured * runtime_s``: the measured ratio is the
    whole profiled wall over the timed wall, so it already holds the tool's set-up and post-processing
    (on a 17 ms program perf measured x16.7, on a 133 ms one x2.2) and no declared ``setup_s`` is added."""
    rebuild = build_s if spec.needs_rebuild else 0.0
    measured = (overheads or {}).get(spec.name)
    if measured is not None and measured > 0:
        return round(measured * runtime_s + rebuild, 3)
    return round(spec.overhead_factor * runtime_s + spec.setup_s + rebuild, 3)


def route(phase: str, needs: Iterable[str], runtime_s: float, specs: Iterable[AdapterSpec],
          usability: Mapping[str, Usability], language: str, *, build_s: float = 0.0,
          rung: str | None = None, overheads: Mapping[str, float] | None = None,
          budget_s: float | None = None) -> RoutingDecision:
    """Choose the cheapest adapter that is usable here, applies to ``language``, serves ``phase``
    and provides every item of ``needs`` (granularities and metric ids). ``overheads``: measured
    factors by adapter (they replace the declared ones); ``budget_s``: the most the capture may
    cost (a cheapest fit above it is refused, with that reason)."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; expected one of {list(PHASES)}")
    need_list = _check_needs(needs)
    rung_name = rung or rung_for(need_list).name
    rejected: list[Rejected] = []
    fits: list[tuple[float, str]] = []
    for spec in sorted(specs, key=lambda s: s.name):
        u = usability.get(spec.name)
        if u is None:
            rejected.append(Rejected(spec.name, "unusable: not probed on this host"))
        elif not u.usable:
            rejected.append(Rejected(spec.name, f"unusable: {u.reason}"))
        elif spec.partial:
            rejected.append(Rejected(spec.name, f"partial: imports pre-captured artifacts only (`pw import RUN "
                                                f"{spec.name}=PATH`); cannot capture here or reprofile"))
        elif language not in spec.targets:
            rejected.append(Rejected(spec.name, f"target: {language} not in {spec.targets}"))
        elif phase not in spec.phases:
            rejected.append(Rejected(spec.name, f"phase: does not serve {phase}"))
        elif gaps := _insight_gaps(spec, need_list):
            rejected.append(Rejected(spec.name, "insight: " + "; ".join(gaps)))
        else:
            fits.append((estimated_cost(spec, runtime_s, overheads, build_s), spec.name))
    used = {s: f for s, f in sorted((overheads or {}).items()) if f > 0 and any(n == s for _, n in fits)}
    base = {"phase": phase, "rung": rung_name, "needs": need_list, "language": language,
            "runtime_s": runtime_s, "overheads": used}
    if not fits:
        return RoutingDecision(**base, chosen=None, rejected=rejected,
                               reason=f"no usable adapter provides {need_list} for {language} ({phase})")
    fits.sort()
    best_cost, best = fits[0]
    if budget_s is not None and best_cost > budget_s:
        rejected += [Rejected(name, f"cost: {cost:.1f} s > budget {budget_s:.1f} s") for cost, name in fits]
        return RoutingDecision(**base, chosen=None, rejected=rejected,
                               reason=f"cheapest usable adapter providing {need_list} ({best}) est. "
                                      f"{best_cost:.1f} s exceeds the climb budget {budget_s:.1f} s")
    rejected += [Rejected(name, f"cost: {cost:.1f} s > {best} {best_cost:.1f} s") for cost, name in fits[1:]]
    measured = f" (measured overhead x{used[best]:.3g})" if best in used else ""
    reason = (f"cheapest usable adapter providing {need_list}: est. {best_cost:.1f} s "
              f"for a {runtime_s:g} s run{measured}")
    return RoutingDecision(**base, chosen=best, reason=reason, estimated_cost_s=best_cost,
                           rejected=rejected)


def _climb(decision: RoutingDecision, to: str, hotspot: str, reason: str) -> Escalation:
    return Escalation(phase=decision.phase, from_rung=decision.rung, to_rung=to,
                      needs=list(RUNGS[to].needs), hotspot=hotspot, reason=reason)


def _stay(decision: RoutingDecision, hotspot: str, reason: str) -> Escalation:
    return Escalation(phase=decision.phase, from_rung=decision.rung, to_rung=None, needs=[],
                      hotspot=hotspot, reason=reason)


def escalate(decision: RoutingDecision, profile: Profile, hotspot: str, *,
             max_span_lines: int = MAX_SPAN_LINES,
             min_samples_per_line: float = MIN_SAMPLES_PER_LINE) -> Escalation:
    """The next rung's needs when the current rung's ``profile`` cannot answer about ``hotspot``
    (an operation id in ``profile``); otherwise ``to_rung=None`` with the reason it answered."""
    op = profile.operation(hotspot)
    if op is None:
        raise ValueError(f"hotspot {hotspot!r} is not an operation of the {profile.tool} profile")
    rung = decision.rung
    if rung in ("gpu-kernel", "gpu-timeline"):
        return _escalate_timeline(decision, profile, op)
    if rung not in GPU_RUNGS and (_GPU_MODULE.match(op.module) or _GPU_NAME.match(op.name)):
        return _climb(decision, "gpu-kernel", hotspot,
                      f"hotspot {hotspot} is CUDA runtime/driver code: the host waits on the GPU, "
                      "so the time is in device work a CPU profiler cannot see")
    if rung == "process-time":
        return _climb(decision, "function-sampling", hotspot,
                      "whole-process time cannot say which code takes the time")
    if rung == "function-sampling":
        return _escalate_sampling(decision, profile, op, max_span_lines, min_samples_per_line)
    if rung == "line-exact":
        cache = [m for m in ("ll_misses", "d1_read_misses") if m in profile.metrics]
        if decision.phase == "diagnosis" and not cache:
            top = max(profile.lines_of(hotspot), default=None,
                      key=lambda lc: lc.self_metrics.get(profile.primary_metric, 0.0))
            where = f"line {top.file}:{top.line}" if top else hotspot
            return _climb(decision, "counters", hotspot,
                          f"instruction counts locate {where} but cannot tell whether it is "
                          "memory-bound: need cache-miss counters (hardware or simulated)")
        return _stay(decision, hotspot, f"exact per-line {profile.primary_metric} locate the cost "
                                        f"inside {hotspot}")
    return _stay(decision, hotspot, f"rung {rung} is the finest applicable for {hotspot}")


def _escalate_sampling(decision: RoutingDecision, profile: Profile, op, max_span: int,
                       min_per_line: float) -> Escalation:
    lines = profile.lines_of(op.id)
    if not lines or op.line_start is None or op.line_end is None:
        return _climb(decision, "line-exact", op.id,
                      f"sampling gave no source-line attribution for {op.id}")
    span = op.line_end - op.line_start + 1
    samples = op.self_metrics.get("samples", 0.0)
    per_line = samples / span
    if span > max_span:
        return _climb(decision, "line-exact", op.id,
                      f"hot {op.id} spans {span} lines (> {max_span}): sampling cannot rank them; "
                      "need exact per-line counts")
    if per_line < min_per_line:
        return _climb(decision, "line-exact", op.id,
                      f"{samples:g} samples over {span} lines of {op.id} = {per_line:.1f}/line "
                      f"(< {min_per_line:g}): line shares are sampling noise; need exact per-line counts")
    return _stay(decision, op.id, f"{samples:g} samples over {span} lines of {op.id} = "
                                  f"{per_line:.1f}/line (>= {min_per_line:g}) rank its lines")


def _escalate_timeline(decision: RoutingDecision, profile: Profile, op) -> Escalation:
    """From the timeline to kernel counters only when a kernel is the hotspot and the device time is
    spent inside kernels, not waiting for launches (the launch-bound test of adapters.gpu_timeline)."""
    if op.kind != "kernel":
        return _stay(decision, op.id, f"hotspot {op.id} is a {op.kind}, not a kernel: kernel counters "
                                      "cannot explain it; the timeline's transfer and gap numbers do")
    t = profile.totals
    launches, calls = t.get("kernel_launches", 0.0), t.get("launch_api_calls", 0.0)
    span = t.get("gpu_span_ns", 0.0)
    if launches and calls and span:
        k_mean = t.get("kernel_time_ns", 0.0) / launches
        api_mean = t.get("launch_api_ns", 0.0) / calls
        idle = t.get("gpu_idle_ns", 0.0) / span
        if k_mean < api_mean and idle > 0.5:
            return _stay(decision, op.id,
                         f"launch-bound: mean kernel {k_mean / 1e3:.1f} us < mean launch call "
                         f"{api_mean / 1e3:.1f} us and the device idles {idle:.0%} of its span; the time is "
                         "between kernels, so kernel counters are not the question")
    share = op.self_metrics.get("gpu_time_ns", 0.0) / (t.get("gpu_time_ns", 0.0) or 1.0)
    return _climb(decision, "kernel-counters", op.id,
                  f"the timeline names kernel {op.name} ({share:.0%} of device activity time); why it is "
                  "slow needs its counters (memory, occupancy, stalls, compute)")


def reprofile_adapters(discovery: str | None, diagnosis: str | None, runtime_s: float,
                       specs: Iterable[AdapterSpec], overheads: Mapping[str, float] | None = None,
                       budget_s: float = REPROFILE_BUDGET_S) -> tuple[list[str], str]:
    """Which adapters reprofile a candidate, and why: the discovery adapter always (the gates diff
    its profile); the adapter that answered the diagnosis too, when its estimated cost fits
    ``budget_s`` (Nsight Compute has its own filtered path and is not listed here)."""
    out = [discovery] if discovery else []
    if not diagnosis or diagnosis == discovery or diagnosis == "ncu":
        return out, "no separate diagnosis adapter"
    spec = next((s for s in specs if s.name == diagnosis), None)
    if spec is None:
        return out, f"diagnosis adapter {diagnosis} is not installed"
    if spec.partial or not spec.can_reprofile:
        return out, f"diagnosis adapter {diagnosis} cannot reprofile (partial: imported artifacts only)"
    cost = estimated_cost(spec, runtime_s, overheads)
    if cost > budget_s:
        return out, f"{diagnosis} est. {cost:.1f} s > reprofile budget {budget_s:.1f} s"
    return out + [diagnosis], f"{diagnosis} est. {cost:.1f} s within the reprofile budget {budget_s:.1f} s"


# One kind of run: the profiler every timed run of a language runs under, in order of preference
# (the first usable one is taken). Each joins a timed run without changing what the program sees
# beyond what every arm sees alike (adapters.base.RunWrap).
TIMED_PROFILERS: dict[str, tuple[str, ...]] = {"native": ("perf",), "python": ("py-spy",), "cuda": ("cupti", "perf")}


def timed_profiler(language: str, usable: dict[str, Usability]) -> str | None:
    """The adapter that profiles every timed run of a ``language`` program here, or None."""
    for name in TIMED_PROFILERS.get(language, ("perf",)):
        u = usable.get(name)
        if u is not None and u.usable:
            return name
    return None
