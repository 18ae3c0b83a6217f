"""The verdict statistics engine: pure functions of samples, parameters and seeds.

No I/O, no clock, no global random state. Speedup = baseline_time / candidate_time (> 1: faster).
"""

from .effect import verdict_of
from .errors import StatsInputError
from .model import (
    FASTER,
    INCONCLUSIVE,
    METHOD_VERSION,
    SAME,
    SLOWER,
    VERDICT_RULE,
    ArmTrend,
    DriftReport,
    Interval,
    OutlierReport,
    PairedAnalysis,
    PairedInputs,
    PairedParams,
    RobustCheck,
    SequentialDecision,
    SequentialParams,
    Verdict,
)
from .order import interleaved_order
from .paired import analyze_pairs, reanalyze
from .planning import fixed_power, pairs_needed, plan_sequential
from .samples import log_ratios
from .sequential import redecide, sequential_decision

__all__ = [
    "FASTER",
    "INCONCLUSIVE",
    "METHOD_VERSION",
    "SAME",
    "SLOWER",
    "VERDICT_RULE",
    "ArmTrend",
    "DriftReport",
    "Interval",
    "OutlierReport",
    "PairedAnalysis",
    "PairedInputs",
    "PairedParams",
    "RobustCheck",
    "SequentialDecision",
    "SequentialParams",
    "StatsInputError",
    "Verdict",
    "analyze_pairs",
    "fixed_power",
    "interleaved_order",
    "log_ratios",
    "pairs_needed",
    "plan_sequential",
    "reanalyze",
    "redecide",
    "sequential_decision",
    "verdict_of",
]
