"""The event vocabulary: the envelope and every typed payload.

Each payload type has a stable name (`TYPE`, never derived from the module path) and a schema
version (`VERSION`). The envelope's `type` field is the union's tag; `data` is the payload. Older
versions are read through the pure upcasters in `ledger.upcast`. New optional fields get defaults;
renames and type changes need a version bump and an upcaster.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ledger import kernel_events as _kernel_events
from ledger.contract import Contract
from ledger.payload import Payload

GENESIS = "0" * 64



class Envelope(msgspec.Struct, frozen=True):
    """One ledger line. Field order is the canonical order on disk.

    `batch` counts the events that follow this one in the same atomic append (0 on the last), so
    a crash in the middle of a batch leaves a recognisably incomplete tail instead of half a batch
    that looks whole.
    """

    seq: int
    id: str
    type: str
    v: int
    at: str
    actor: str
    cause: str | None
    key: str | None
    batch: int
    data: Any
    prev: str
    hash: str = ""


# --- shared pieces ------------------------------------------------------------------------------


class Host(msgspec.Struct, frozen=True):
    hostname: str
    platform: str
    machine: str
    cpus: int
    python: str


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """Where a campaign ran when a scheduler placed it (a Slurm allocation): that machine's own facts
    (its CPUs are what the load of its runs is read against) and the job that held it."""

    host: Host
    scheduler: str = "slurm"
    job_id: str = ""
    node: str = ""       # the scheduler's name for the machine (SLURMD_NODENAME)
    partition: str = ""
    exclusive: bool = False  # the job held the whole node

    def describe(self) -> str:
        """"n1 (host vm, 2 CPUs; Slurm job 12, partition pw, exclusive)"."""
        job = ", ".join(x for x in (f"{self.scheduler.capitalize()} job {self.job_id}",
                                    f"partition {self.partition}" if self.partition else "",
                                    "exclusive" if self.exclusive else "") if x)
        return f"{self.node or self.host.hostname} (host {self.host.hostname}, {self.host.cpus} CPUs; {job})"


class Budgets(msgspec.Struct, frozen=True):
    iterations: int
    repairs: int


class ToolInfo(msgspec.Struct, frozen=True):
    name: str
    version: str | None
    path: str | None = None


class ProfilerProbe(msgspec.Struct, frozen=True):
    name: str
    usable: bool
    version: str | None
    mode: str | None
    reason: str


class StepOutcome(msgspec.Struct, frozen=True):
    argv: list[str]
    exit_code: int | None
    signal: int | None
    duration_s: float
    timed_out: bool
    log_sha256: str | None


class Rejection(msgspec.Struct, frozen=True):
    adapter: str
    reason: str


FailureClass = Literal[
    "build-failed",
    "launch-failed",
    "oracle-failed",
    "timeout",
    "crashed",
    "nondeterministic-output",
    "profiler-unusable",
    # Caught (issue 12): a run left something for the next one (a file in or outside its tree, a
    # process still running), or a timed or profiled run's output differs from the oracle-checked
    # output. Never repairable: the verdict is rejected with what it did.
    "caught",
    "output-mismatch",
]


# --- run lifecycle ------------------------------------------------------------------------------


class RunStarted(Payload, frozen=True):
    TYPE = "RunStarted"
    run_id: str
    workload: str
    contract: Contract
    manifest_sha256: str | None
    inferred: bool
    inference: list[str]
    source_sha256: str
    budgets: Budgets
    host: Host
    # How baseline/ was copied from the workload (pw.workload.workspace: `reflink`, `copy_file_range`,
    # `read-write` when the runs directory is on another filesystem), each method once.
    copied_by: list[str] = []


class PreflightCompleted(Payload, frozen=True):
    TYPE = "PreflightCompleted"
    cache_key: str
    cached: bool
    compilers: list[ToolInfo]
    python: str
    gpu: str | None
    profilers: list[ProfilerProbe]
    # The sandbox every target's code runs in ("bwrap (bubblewrap 0.8.0)"), or None with the
    # reasons none could be made (the verdict's ceiling is then `proposed`).
    sandbox: str | None = None
    sandbox_reasons: list[str] = []


class BuildFinished(Payload, frozen=True):
    TYPE = "BuildFinished"
    target: str
    inputs_sha256: str
    outcome: Literal["ok", "build-failed", "timeout"]
    steps: list[StepOutcome]
    duration_s: float
    binary_sha256: str | None = None
    # What a timed run loads (pw.workload.image): equal images run the same code on the same data.
    image_sha256: str | None = None
    # Why a build whose steps all passed still failed: its tree is one pw will not hash or time
    # (pw.workload.changes.HostileTree: a path beyond PATH_MAX, a fifo, a link out of the tree...).
    problem: str | None = None


class OracleChecked(Payload, frozen=True):
    TYPE = "OracleChecked"
    target: str
    method: str
    inferred: bool
    rtol: float
    atol: float
    passed: bool
    detail: str
    run: StepOutcome | None = None
    output_sha256: str | None = None
    outside_writes: list[str] = []  # files the traced oracle run wrote outside its workspace
    # What the oracle run left for the next run, in words (pw.workload.steps.left_behind): a
    # candidate is caught for what it leaves beyond the baseline's own list.
    left_behind: list[str] = []
    # The oracle-checked run's stderr and declared output file, for the per-run output checks.
    stderr_sha256: str | None = None
    output_file_sha256: str | None = None
    # What the comparison covered, in words ("stdout: 720 lines, 518400 fields, rtol=1e-09 ...");
    # None for events recorded before it was said.
    compared: str | None = None
    lines_compared: int | None = None  # non-empty output lines the comparison covered
    # Why this oracle is no oracle (it compared zero lines or an empty output, or only an exit
    # status): a contract failure that caps every verdict at `proposed` until the user gives one.
    compares_nothing: str | None = None
    # Holdout inputs this check ran, each "argv: outcome" (fixed ones and fresh ones drawn for it).
    holdouts: list[str] = []
    tracing: str | None = None  # how that run was traced (write_trace.strace_mode); None: not traced


class HoldoutsDrawn(Payload, frozen=True):
    """Fresh holdout inputs for one target, drawn from the manifest's generators only after that
    target was built and its binary hashed, with a seed that appears nowhere before this event."""

    TYPE = "HoldoutsDrawn"
    target: str
    binary_sha256: str | None
    seed: int
    inputs: list[list[str]]  # argv of each drawn input, in the order they run


class FaultRecorded(Payload, frozen=True):
    """A classified failure of the workload or a tool. Faults are data, not crashes."""

    TYPE = "FaultRecorded"
    stage: str
    target: str
    failure_class: FailureClass
    message: str
    log_sha256: str | None = None


class CampaignLook(msgspec.Struct, frozen=True):
    """What the stopping rule said after `n_pairs` pairs of the campaign (all parts counted),
    `elapsed_s` seconds into this part."""

    n_pairs: int
    elapsed_s: float
    reason: Literal["continue", "faster", "slower", "same", "max_pairs", "max_time", "empty_interval"]
    # pw.campaign/3: whether the hotspot's part was shown to carry the saving at this look
    # ("carried", "not-carried", "undecided"; None: not asked, the speedup was not faster).
    mechanism: str | None = None
    admitted: int | None = None  # pairs of the look that counted (None: all)


class CampaignRecord(msgspec.Struct, frozen=True):
    """The stopping rule of one part of an adaptive campaign (`pw.stats.adaptive`) and its looks.

    `stop` is why the part ended: decided (faster/slower), margin (no effect within ±margin),
    budget (max_pairs or max_time_s spent) or misfit (the interval became empty). `continues` is
    the seq of the TimingRecorded whose campaign this part extends (`pw evaluate --more`); the
    samples of a continuation hold its own pairs only, and `max_pairs` counts every part's pairs.
    """

    rule: str
    min_effect: float
    margin: float
    confidence: float
    min_pairs: int
    max_pairs: int
    max_time_s: float
    look_every: int
    prior_scale: float
    looks: list[CampaignLook]
    stop: Literal["decided", "margin", "budget", "misfit"]
    continues: int | None = None
    # pw.campaign/3: a pair whose arms' load differs by more than this share of their wall time is set
    # aside (None: every pair counts); the mechanism must be decided too (fraction of the saving the
    # hotspot's part must carry, None: not part of the rule).
    max_load_imbalance: float | None = None
    mechanism_fraction: float | None = None
    cpus: int | None = None  # the machine's CPUs, which the load shares are of


class TimedArm(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One timed target: its built tree's digest before and after the timing, and the digest of
    the contract's declared inputs (path and content of each, as found in that tree)."""

    binary_before: str | None = None
    binary_after: str | None = None
    inputs_sha256: str | None = None


class TimingConditions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What a timing ran under; the significance gate compares a campaign's with the baseline's."""

    host: str
    argv: list[str]
    metric: str = ""
    tool_versions: dict[str, str] = {}
    warmup_runs: int = 0
    arms: dict[str, TimedArm] = {}  # by target label
    side_effects: list[str] = []  # files runs created, modified or deleted in their tree
    # Where the manifest declares a generator for the timed input: the seed drawn for this campaign
    # and the argv each pair ran (both arms the same), so an audit knows what was compared.
    input_seed: int | None = None
    pair_inputs: list[list[str]] = []
    # The sandbox every run ran in ("bwrap (bubblewrap 0.8.0)"), or "none: <why>" (the verdict's
    # ceiling is then `proposed`); "" for timings recorded before the sandbox existed.
    sandbox: str = ""
    # Which streams every timed run was checked on against its oracle-checked output, and which
    # were left unchecked because the baseline's own runs do not reproduce them.
    output_checks: list[str] = []
    unchecked_streams: list[str] = []
    # Set when the campaign ran in a scheduler's allocation (`--remote`), not on the run's host:
    # both arms' runs ran there. None: on `host`, the run's own.
    node: Node | None = None


class CodeRegion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A function's definition lines in one tree (relative file path, 1-based, inclusive)."""

    file: str
    name: str
    start: int
    end: int


class CodeSide(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What counts as one part of a program in one arm's runs: cost on these functions' lines, on
    these lines, or in operations of these names (kernels, functions without line information)."""

    regions: list[CodeRegion] = []
    lines: dict[str, list[int]] = {}
    operations: list[str] = []


class Attribution(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """How each profiled run's cost is split (``pw.rules.attribution``). ``hotspot``: the hotspot's
    code in the reference's tree; ``changed``: in the candidate's tree, the hotspot's code and every
    function the candidate changed or added and every line it changed (gate rules 19: changed code
    is no hiding place); ``reach``: in the reference's tree, the hotspot's code and the functions the
    candidate changed (what its saving can come from: the Amdahl ceiling). ``beyond``: the functions
    and files the patch changes outside the hotspot's own function (a hybrid arm tests them)."""

    hotspot_operation: str
    hotspot: CodeSide
    changed: CodeSide
    reach: CodeSide
    changed_functions: list[str] = []
    beyond: list[str] = []
    # The hybrid arm's part, read in its own tree (its hotspot's code and the lines its own diff against
    # the parent changed); None before it was recorded, when the hybrid's runs were read by ``changed``,
    # whose line numbers are the candidate's (a red team's helpers above the hotspot shifted them onto
    # the parent's set-up code).
    hybrid: CodeSide | None = None


class ProfiledRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One timed run's profile: its raw artifacts by role and its normalized profile, by sha256."""

    raw: dict[str, str]
    profile: str


class RunProfiler(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The profiler every timed run of a campaign ran under, and the build tree each arm's
    debug information names (normalize needs it to make paths relative)."""

    adapter: str
    tool_version: str = ""
    options: dict[str, str | int | float | bool] = {}
    source_roots: dict[str, str] = {}


class TimingRecorded(Payload, frozen=True):
    """Raw timing samples. `order` is the recorded, seeded A/B order of each pair ('AB' or 'BA').

    v2: typed `conditions` (v1 kept them as strings, argv joined by spaces and tool versions as
    "k=v; k=v"), and the inputs digest per arm inside them (v1's `inputs_sha256` held a binary's).
    `campaign` is set for an adaptive campaign (None: a fixed number of pairs).
    """

    TYPE = "TimingRecorded"
    VERSION = 2
    # "unprofiled": `pw confirm`'s pairs without a profiler (the program as the user runs it): shown
    # beside the profiled speedup, read by no gate.
    purpose: Literal["baseline-variance", "screening", "confirmation", "unprofiled"]
    targets: list[str]
    metric: str
    unit: str
    samples: dict[str, list[float]]
    order: list[str]
    seed: int
    exploratory: bool
    conditions: TimingConditions
    campaign: CampaignRecord | None = None
    # One kind of run (gate rules 19): every timed run ran under ``profiler``; ``runs`` holds each
    # arm's profiles in run order, and ``samples`` then also holds, per run, ``{label}:hot_s`` (the
    # seconds ``attribution`` gives the hotspot's part), ``{label}:reach_s`` (the reference's code that
    # the candidate changed, for the Amdahl ceiling), ``{label}:user_s`` and ``{label}:sys_s``.
    profiler: RunProfiler | None = None
    runs: dict[str, list[ProfiledRun]] = {}
    attribution: Attribution | None = None


class HybridPrepared(Payload, frozen=True):
    """The hybrid arm of a candidate whose patch reaches beyond the hotspot (gate rules 19): its
    parent with only the hotspot's changed function(s) taken from the candidate, spliced by the
    parsers. ``status``: "built" (built and checked by the same oracle: timed as a third arm), or why
    there is none ("coupled: ...": it did not build or failed the oracle, so the changes hang together
    and the mechanism is judged by changed-code attribution alone; "not-needed" never appears, an
    event is recorded only when the patch reaches beyond the hotspot). ``source_sha256`` and
    ``patch_sha256``: the hybrid's tree manifest and its diff against the parent, as evidence."""

    TYPE = "HybridPrepared"
    id: str
    attempt: int
    label: str
    status: str
    functions: list[str] = []
    source_sha256: str | None = None
    patch_sha256: str | None = None


class ClaimChecked(Payload, frozen=True):
    """The agent's mechanism text is its claim: kept for audit, read by no gate. ``findings`` are where
    the changed code does not show what the claim names (``pw.agent.source.claims``), for the report."""

    TYPE = "ClaimChecked"
    id: str
    attempt: int
    claim: str
    findings: list[str] = []


class UnprofiledCompared(Payload, frozen=True):
    """`pw confirm`'s pairs without a profiler (the TimingRecorded of purpose "unprofiled" at
    ``timing_seq``): their speedup (geometric mean, 95% t-interval), and whether it disagrees with the
    profiled verdict beyond both intervals (a finding for the report; no gate reads it)."""

    TYPE = "UnprofiledCompared"
    id: str
    timing_seq: int
    pairs: int
    speedup: float
    interval: list[float]
    disagrees: bool


class AttemptAbandoned(Payload, frozen=True):
    """An evaluation attempt that was interrupted before its verdict and will not be continued (its
    workspace was edited since): it is closed, and the next `pw evaluate` starts a new attempt."""

    TYPE = "AttemptAbandoned"
    id: str
    attempt: int
    reason: str


class RoutingDecided(Payload, frozen=True):
    """v2 records the measured overhead factors the costs used (`overheads`, by adapter; an
    adapter absent there was costed with its declared factor). A diagnosis that climbs several
    rungs records one decision per climb, in order."""

    TYPE = "RoutingDecided"
    VERSION = 2
    phase: Literal["discovery", "diagnosis"]
    chosen: str | None
    reason: str
    rejected: list[Rejection]
    needs: list[str] = []
    overheads: dict[str, float] = {}


class ProfileCaptured(Payload, frozen=True):
    """v2 records the adapter's facts at capture (`can_reprofile`), so a verdict is judged by what
    was true then, not by the adapter registry of whichever ProfileWeaver audits it later.

    v3 records the observed overhead (`wall_s` over `timed_wall_s`, the target's uninstrumented timed
    wall; routing folds these via `projections.overhead`), the hash of the program's executable alone
    (`executable_sha256`), and `reused_from`: the target whose capture of a byte-identical executable
    this one reuses (its raw evidence, normalized again for this target; no profiler ran), and
    `launched`/`program_*`: the launcher's report on the profiled program (gate rules 5 compare it
    with the timed runs; a reuse carries its source's report, the same executable's run)."""

    TYPE = "ProfileCaptured"
    VERSION = 3
    adapter: str
    target: str
    artifacts: dict[str, str]
    wall_s: float
    tool_version: str | None
    command: list[str]
    can_reprofile: bool
    source_root: str = ""  # absolute build tree the raw paths refer to; normalize needs it again
    build_note: str | None = None  # which build was profiled (a second one with -g?) and whether its code is the same
    timed_wall_s: float | None = None  # mean uninstrumented wall of the same target's timed runs
    overhead: float | None = None  # wall_s / timed_wall_s; None when reused or never timed
    executable_sha256: str | None = None  # the timed build's executable file alone (native programs)
    reused_from: str | None = None  # the target whose capture this reuses (same executable_sha256)
    # Launched like a timed run (pw's launcher, the timed run's sandbox and environment; perf
    # outside): the launcher's report on the profiled program, its wall and CPU (user + system)
    # seconds. None: no report came (a failure of the evidence), or a capture from before.
    launched: bool = False
    program_wall_s: float | None = None
    program_cpu_s: float | None = None


class ProfileNormalized(Payload, frozen=True):
    """The normalized profile of one capture, or (``parts`` not empty) of several: the profile that
    sums the samples of the single-run profiles ``parts`` (their sha256, in order; each recorded
    before by its own ProfileNormalized), ``ledger.profile.merge_profiles``. A reprofile grows this
    way until it resolves the saving it is asked to explain (``ReprofileResolved``). v1 had no
    ``parts``: every v1 profile is one capture."""

    TYPE = "ProfileNormalized"
    VERSION = 2
    adapter: str
    target: str
    profile_sha256: str
    primary_metric: str
    total: float
    parts: list[str] = []


class ResolutionLook(msgspec.Struct, frozen=True, kw_only=True):
    """One look of a reprofile's resolution (``pw.rules.resolution``): the merged profiles of the
    first ``runs_before`` reference runs and ``runs_after`` candidate runs, their sample counts and
    the hotspot's shares, the band those give, and what the rule said then: ``resolved``,
    ``before``/``after`` (profile one more run of that side), ``budget`` or ``futile``."""

    runs_before: int
    runs_after: int
    samples_before: float
    samples_after: float
    share_before: float
    share_after: float
    band: float
    elapsed_s: float
    decision: Literal["resolved", "before", "after", "budget", "futile"]


class ReprofileResolved(Payload, frozen=True):
    """How many profiled runs and samples the reprofile of ``target`` took, and why.

    The mechanism gate reads sampled profiles by share, with a band of 3 binomial sigmas over their
    sample counts; ``pw.rules.resolution`` says how many samples resolve the saving of the campaign's
    ``speedup`` (band <= ``fraction`` x (speedup - 1)) and which side to profile once more. The
    reference's and the candidate's single-run profiles are ``before_parts`` and ``after_parts``;
    look k merged the first ``runs_before``/``runs_after`` of them, so ``pw audit`` replays every look
    from the evidence. ``stop``: ``resolved``, ``budget`` (``max_runs`` per profile or
    ``max_time_s`` spent; ``required_samples`` per profile would resolve it), ``futile`` (rule
    ``share-band/2``: even ``max_runs`` per profile could not resolve it, so it stopped growing) or
    ``not-needed`` (the campaign did not decide faster: there is no saving to resolve)."""

    TYPE = "ReprofileResolved"
    target: str
    reference: str
    stop: Literal["resolved", "budget", "futile", "not-needed"]
    speedup: float | None
    required_samples: int | None
    reason: str
    adapter: str
    rule: str
    fraction: float
    target_band: float | None
    max_runs: int
    max_time_s: float
    looks: list[ResolutionLook]
    before_parts: list[str]
    after_parts: list[str]
    # Rule share-band/3: the runs each side's profile sums at least, from the campaign's spread (the
    # arms' larger SD of log run time); 1 and None under the older rules.
    min_runs: int = 1
    spread: float | None = None


class HotspotSelected(Payload, frozen=True):
    """The operation a rewrite should target: its inclusive ``share`` of the profile's primary
    ``metric`` and the Amdahl ceiling of the whole program.

    v2 records ``span_share``: for a device-time profile (a GPU timeline) that recorded the host's
    span around the device work, the operation's share of that span, which the ceiling is taken from
    (device work can hide behind host work, so its share of device time alone would promise too
    much); None for any other profile, whose ceiling comes from ``share``. v1 had no such field:
    readers re-derived it from the ceiling."""

    TYPE = "HotspotSelected"
    VERSION = 2
    operation: str
    name: str
    file: str | None
    line_start: int | None
    line_end: int | None
    metric: str
    share: float
    amdahl_ceiling: float | None
    span_share: float | None = None
    # What the ceiling is of, for a device-time profile: "region" (the region a region-of-interest
    # metric times), "wall" (the program's wall time) or "span" (the host's CUDA span); and the
    # operation's share of it, which the ceiling was taken from. None: the ceiling comes from
    # ``share`` (any other profile, and device-time events recorded before this was said).
    ceiling_of: str | None = None
    ceiling_share: float | None = None


class SourceTargetsEmitted(Payload, frozen=True):
    """Bounded source ranges for the agent, the brief's numbers and where the files are (by hash)."""

    TYPE = "SourceTargetsEmitted"
    target: str
    document: dict[str, Any]
    slices: dict[str, str]
    frontier: list[str]
    mechanisms: list[dict[str, Any]]
    editable: list[str]


class BriefEmitted(Payload, frozen=True):
    """The agent brief as emitted, with its measured token count (o200k_base)."""

    TYPE = "BriefEmitted"
    target: str
    text: str
    tokens: int
    tokenizer: str
    numbers: dict[str, Any]
    view: dict[str, Any]
    costs: dict[str, int]


# --- candidates ---------------------------------------------------------------------------------


class CandidatePrepared(Payload, frozen=True):
    """A workspace copied from its parent for the agent to edit. `mechanism` is the agent's own
    words: kept for audit, never used to invent mechanisms."""

    TYPE = "CandidatePrepared"
    id: str
    parent: str
    resolved_parent: str
    mechanism: str
    workspace: str
    parent_source_sha256: str
    parent_manifest_sha256: str
    editable: list[str]
    targets: list[str]


class CandidateDiffRecorded(Payload, frozen=True):
    """What the agent changed against the parent; refused edits make the candidate rejected."""

    TYPE = "CandidateDiffRecorded"
    id: str
    attempt: int
    patch_sha256: str
    changed: list[str]
    refused: list[str]
    source_sha256: str


class GateResult(msgspec.Struct, frozen=True):
    name: str
    passed: bool
    detail: str
    evidence: list[int] = []


class CandidateEvaluated(Payload, frozen=True):
    """The pieces of one evaluation, by the seq of the events holding them, and the paired analysis
    (plain data from `pw.stats`, recomputable from the timing samples it cites)."""

    TYPE = "CandidateEvaluated"
    id: str
    attempt: int
    exploratory: bool
    build_seq: int | None
    oracle_seq: int | None
    timing_seq: int | None
    profile_sha256: str | None
    profile_diff_sha256: str | None
    analysis: dict[str, Any] | None


class GatesEvaluated(Payload, frozen=True):
    """The six gates and the inputs they read. `rules` is the version of the gate rules that
    evaluated them (`pw.rules.gates.GATE_RULES`); events written before it was recorded are version 1."""

    TYPE = "GatesEvaluated"
    id: str
    attempt: int
    gates: list[GateResult]
    inputs: dict[str, Any]
    rules: int = 1


class VerdictReached(Payload, frozen=True):
    """A candidate attempt's status and why. `repairable` is True only for a rejection an edit can
    address (edits refused, a failed build, oracle or timed run): it spends one of the candidate's
    repairs and lets it be evaluated again. v1 left that implicit in the reasons' prefixes."""

    TYPE = "VerdictReached"
    VERSION = 2
    id: str
    attempt: int
    status: Literal["verified", "proposed", "rejected", "inconclusive"]
    reasons: list[str]
    repairable: bool
    speedup: float | None
    interval: list[float] | None
    exploratory: bool = False
    # What `speedup` is measured against: "baseline", or the parent a chained candidate was timed
    # against (then `speedup` is the step; the cumulative one is the product along the chain).
    reference: str = "baseline"


class WinnerConfirmed(Payload, frozen=True):
    TYPE = "WinnerConfirmed"
    id: str
    fresh: bool
    status: Literal["verified", "proposed", "rejected", "inconclusive"]
    reasons: list[str]
    speedup: float | None
    interval: list[float] | None
    timing_seq: int | None
    reference: str = "baseline"  # as in VerdictReached


class StageCompleted(Payload, frozen=True):
    """Marks a resumable stage done for inputs with this hash; a resumed start skips it."""

    TYPE = "StageCompleted"
    stage: str
    inputs_sha256: str


class LedgerRepaired(Payload, frozen=True):
    TYPE = "LedgerRepaired"
    offset: int
    length: int
    quarantine: str
    torn_sha256: str
    reason: str


class Note(Payload, frozen=True):
    """Free text attached to the run by a person or agent; kept for audit, never interpreted."""

    TYPE = "Note"
    text: str


# The kernel-profile cache's events live in their own module but share this one registry, so one
# store and one codec read every ledger.
EVENT_TYPES: dict[str, type[Payload]] = {
    cls.TYPE: cls
    for cls in (
        RunStarted,
        PreflightCompleted,
        BuildFinished,
        OracleChecked,
        HoldoutsDrawn,
        FaultRecorded,
        TimingRecorded,
        HybridPrepared,
        ClaimChecked,
        UnprofiledCompared,
        AttemptAbandoned,
        RoutingDecided,
        ProfileCaptured,
        ProfileNormalized,
        ReprofileResolved,
        HotspotSelected,
        SourceTargetsEmitted,
        BriefEmitted,
        CandidatePrepared,
        CandidateDiffRecorded,
        CandidateEvaluated,
        GatesEvaluated,
        VerdictReached,
        WinnerConfirmed,
        StageCompleted,
        LedgerRepaired,
        Note,
        *_kernel_events.KERNEL_EVENT_TYPES,
    )
}


# --- added for the partial children and per-actor cost (issue 30); appended, never renamed ----------


class ProfileImported(Payload, frozen=True):
    """A profile a tool wrote elsewhere, imported by `pw import` through a partial adapter (HPCToolkit,
    GVProf, DrGPUM, GPA): the artifacts by hash, the normalized profile, and the brief shown for it.

    Nothing here was measured by pw on this host: the adapter cannot capture or reprofile, so
    `gate_limits` (gate -> why) lists the gates its evidence can never pass and `ceiling` the best
    status a verdict resting on it can reach."""

    TYPE = "ProfileImported"
    adapter: str
    target: str
    source: str  # the path as the user gave it (on this machine)
    artifacts: dict[str, str]  # role -> sha256 under raw/
    tool_version: str
    profile_sha256: str
    primary_metric: str
    total: float
    ceiling: str
    gate_limits: dict[str, str]
    brief: str
    tokens: int
    tokenizer: str
    # The run's files the profile's paths were matched to (the rest of the tree cannot change the
    # match), so `pw audit` renormalizes the artifacts to the same bytes.
    files: list[str] = []


class ViewEmitted(Payload, frozen=True):
    """One bounded `pw inspect` output handed to the actor that asked (envelope `actor`), counted in
    o200k tokens for cost.json. The view itself is rebuilt from the ledger; only its size is kept."""

    TYPE = "ViewEmitted"
    section: str
    candidate: str | None
    group: str | None
    tokens: int
    tokenizer: str
    shown: int
    total: int


EVENT_TYPES.update({cls.TYPE: cls for cls in (ProfileImported, ViewEmitted)})


# --- added for `pw evaluate RUN ID [ID ...]` (issue 30); appended, never renamed --------------------


class BatchPlanned(Payload, frozen=True):
    """Several candidates evaluated by one `pw evaluate RUN A B ...` as one quiet batch, recorded
    before the first of them is touched. `candidates` as given; `order` the order their campaigns
    run in. `mode` "builds-first": every candidate's diff, build, holdouts and oracle check first (a
    candidate that fails them is judged then, and the others go on), then the campaigns one after
    another in `order`, never two at once (docs/decisions/0029-quiet-batches.md). `max_pairs` and
    `max_time_s` are the command's budgets for each campaign (None: the manifest's)."""

    TYPE = "BatchPlanned"
    batch: str
    candidates: list[str]
    order: list[str]
    mode: Literal["builds-first"]
    max_pairs: int | None = None
    max_time_s: float | None = None


EVENT_TYPES[BatchPlanned.TYPE] = BatchPlanned
