"""The workload contract (`profileweaver.json`) as typed data.

This is the shape every candidate is judged by; it is recorded whole in `RunStarted`, so a run can
be replayed and audited without the workload directory. Validation of a user's file into these
types, with messages that name the field, lives in `pw.workload.manifest`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, description="seconds, > 0")]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Argv = Annotated[list[str], msgspec.Meta(min_length=1, description="argv list; never a shell string")]


class Step(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One process to run: argv, working directory relative to the workload copy, extra env."""

    argv: Argv
    cwd: str = "."
    env: dict[str, str] = {}
    timeout_s: PositiveSeconds = 600.0


class Source(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The source tree: `root` is copied to `baseline/`; only `editable` globs may change in a candidate."""

    editable: Annotated[list[str], msgspec.Meta(min_length=1)]
    root: str = "."
    exclude: list[str] = []


# A number as programs print it: 0.000231, 2.3e-04, .5, 12
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def timer_pattern(label: str) -> str:
    """The region pattern a `timer` label stands for: the label, an optional colon, then the first
    number on the same line or alone on the next (`GPU Runtime: 0.00023` and `GPU Runtime:` /
    `0.00023` alike). The lines it spans carry the run's own time, so no oracle compares them."""
    text = label.strip().rstrip(":").rstrip()
    return re.escape(text) + r"[ \t]*:?[ \t]*(?:\r?\n[ \t]*)?" + _NUMBER


class Metric(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What is timed: whole-process wall time, a region of interest the program prints, or one
    operation's cost. A region: `timer` names the label of a timer line (the number on that line or
    the next), `pattern` is a regular expression with one group around the number, `json_key` a key
    of a JSON line. An operation (``operation``: a function or kernel by name) is measured in every
    timed run's profile, and the whole-process time is then the collateral check."""

    kind: Literal["wall", "roi", "operation"] = "wall"
    pattern: str | None = None
    json_key: str | None = None
    unit: Literal["s", "ms", "us", "ns"] = "s"
    timer: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    operation: str | None = None

    @property
    def region_pattern(self) -> str | None:
        """The regular expression that finds the region's number (from `timer` or `pattern`), or
        None (wall time, an operation, or a JSON key)."""
        if self.kind != "roi":
            return None
        if self.timer is not None:
            return timer_pattern(self.timer)
        return self.pattern


class Holdout(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An extra run with other inputs, checked against its own reference (defeats hard-coded output)."""

    argv: Argv
    reference: str


Range = Annotated[list[int], msgspec.Meta(min_length=2, max_length=2, description="[low, high], inclusive")]


class HoldoutGenerator(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Secret, fresh holdout inputs (differential testing). `argv` is a template whose `{name}`
    placeholders are drawn uniformly from the integer ranges `ranges[name]` = [low, high] only when
    a target has been built and hashed, with a seed recorded then; the baseline run on the same
    input is the reference. `seed` names the placeholder that is only a seed: when the generator
    matches the timed run's argv, each timed pair runs the timed argv with that placeholder drawn
    afresh (same size, new seed), and both arms' outputs are compared within the pair."""

    argv: Argv
    ranges: dict[str, Range]
    count: Annotated[int, msgspec.Meta(ge=1, le=20)] = 2
    seed: str | None = "seed"


class Oracle(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How correctness is decided. `stdout`/`file` compare numbers within rtol/atol, other tokens exactly.
    `baseline` compares stdout with the baseline's stdout on the same input (itself checked to be
    reproducible across two runs at `pw start`): the baseline is the reference."""

    kind: Literal["exit", "stdout", "file", "command", "stable", "baseline"] = "exit"
    reference: str | None = None
    path: str | None = None
    argv: list[str] | None = None
    rtol: NonNegative = 1e-9
    atol: NonNegative = 0.0
    holdout: list[Holdout] = []
    generators: list[HoldoutGenerator] = []
    # For `stable`: which outputs must agree (files = files the run creates in its working tree).
    # None means all three; `["stderr"]` says only stderr matters (stdout carries timings, say).
    streams: Annotated[list[Literal["stdout", "stderr", "files"]], msgspec.Meta(min_length=1)] | None = None


class Sampling(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Paired timing campaigns. A campaign is adaptive: it runs `pairs` pairs (the minimum for
    significance), then looks after every block of two pairs and stops when the anytime-valid
    interval decides faster or slower, lies within ±`margin` (no effect), or a budget is spent
    (`max_pairs` pairs, `max_time_s` seconds of campaign time; `pw evaluate --max-pairs/--max-time`
    override them for one call, `--more` continues an inconclusive campaign). 64 pairs: at 5% CV an
    honest 5% hotspot saving is verified, speedup and mechanism both, in 88% of simulated campaigns
    (62-70% at the former 40; `benchmarks/stats_sim.py --mechanism-only`); campaigns that decide
    early stop there, so the budget costs only the undecided."""

    mode: Literal["standard", "winner-confirmation"] = "standard"
    pairs: Annotated[int, msgspec.Meta(ge=5, le=200)] = 5
    margin: Annotated[float, msgspec.Meta(gt=0.0, lt=0.5)] = 0.02
    max_pairs: Annotated[int, msgspec.Meta(ge=5, le=10000)] = 64
    max_time_s: Annotated[float, msgspec.Meta(gt=0.0)] = 600.0


class Profiling(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """When candidates are reprofiled, and how far a sampled reprofile may grow to resolve the saving
    it is asked to explain (``pw.rules.resolution``): at most `max_runs` profiled runs per profile
    (the reference's and the candidate's, samples summed) and `max_time_s` seconds of profiling per
    evaluation."""

    cadence: Literal["every-candidate", "winner-only"] = "every-candidate"
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=200)] = 16
    max_time_s: Annotated[float, msgspec.Meta(gt=0.0)] = 180.0


class Contract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole workload contract, explicit or inferred."""

    version: Literal[1]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    source: Source
    run: Step
    build: list[Step] = []
    inputs: list[str] = []
    metric: Metric = Metric()
    oracle: Oracle = Oracle()
    sampling: Sampling = Sampling()
    profiling: Profiling = Profiling()
