"""Facts shared by the reprofiled gates (``pw.rules.gates_reprofiled``) and the two rule modules they
read, the start-up offset (``pw.rules.startup``) and the reprofile's sizing (``pw.rules.resolution``):
the noise bands' sigmas, the profiled-against-timed consistency record, and the sample totals of a
profile diff. They live below all three so that imports point one way (gates_reprofiled reads
startup and resolution, and all three read this)."""

from __future__ import annotations

from projections.profile_diff import ProfileDiff
from pw.rules.gate_facts import Plain

# Noise band of a sampled metric: this many Poisson standard deviations of the difference of two
# sample counts, sqrt(n_before + n_after) samples, converted to the metric.
POISSON_SIGMAS = 3.0
# Rules 5: a profiled run is one run, a timed median many; the log of (profiled / timed median),
# candidate against reference, may differ by this many standard deviations of one timed run of
# each arm (their logs' spreads, combined), and never by less than CONSISTENCY_FLOOR: the
# profiler's own overhead is not exactly proportional to the run (perf's DWARF unwinding costs per
# sample, page faults and start-up do not scale), and a five-run spread can come out small by luck.
CONSISTENCY_SIGMAS = 3.0
CONSISTENCY_FLOOR = 0.10


class ProfileConsistency(Plain):
    """Whether the profiled runs were the timed programs (gate rules 5). A program that can tell
    a profiled run from a timed one can shape its profile (keep a saving out of it, or put cost
    where the gate wants a shrink); whatever it does, the profiled run must take as long, relative
    to its own timed runs, as the reference's profiled run did to the reference's.

    ``*_launched``: the profiled program ran under pw's launcher, as a timed run does (its report,
    ``*_profiled_wall_s``, is the program's own wall time; None: the report never came). Timed
    runs: the median and the standard deviation of the logs of the whole-process seconds."""

    baseline_launched: bool = False
    candidate_launched: bool = False
    baseline_profiled_wall_s: float | None = None
    candidate_profiled_wall_s: float | None = None
    baseline_timed_median_s: float | None = None
    baseline_timed_log_sd: float | None = None
    baseline_timed_runs: int = 0
    candidate_timed_median_s: float | None = None
    candidate_timed_log_sd: float | None = None
    candidate_timed_runs: int = 0
    # How many profiled runs each profile sums (``ProfileNormalized.parts``; 1 for a single capture).
    baseline_profile_runs: int = 1
    candidate_profile_runs: int = 1


def sampled_totals(d: ProfileDiff) -> tuple[float, float] | None:
    """Total samples of the two profiles, when every operation's sample count is known."""
    if not d.operations or any(o.samples_before is None or o.samples_after is None for o in d.operations):
        return None
    nb = sum(o.samples_before for o in d.operations)
    na = sum(o.samples_after for o in d.operations)
    return (nb, na) if nb > 0 and na > 0 and d.total_before > 0 and d.total_after > 0 else None
