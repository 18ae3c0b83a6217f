"""The verdict statistics engine: pure functions of samples, parameters and seeds.

No I/O, no clock, no global random state. Speedup = baseline_time / candidate_time (> 1: faster).

The names below are the package's API; each loads its module on first use (PEP 562), so a command
that needs only the confidence sequences (`shares`, `sequential`, `adaptive`) does not pay for
scipy.stats (0.55 s here), which the paired analysis, the drift test and the planning import.
"""

from importlib import import_module
from typing import TYPE_CHECKING

_WHERE = {
    "verdict_of": "effect",
    "StatsInputError": "errors",
    **dict.fromkeys(["FASTER", "INCONCLUSIVE", "METHOD_VERSION", "SAME", "SLOWER", "VERDICT_RULE", "ArmTrend",
                     "DriftReport", "Interval", "OutlierReport", "PairedAnalysis", "PairedInputs", "PairedParams",
                     "RobustCheck", "SequentialDecision", "SequentialParams", "Verdict"], "model"),
    "interleaved_order": "order",
    "analyze_pairs": "paired",
    "reanalyze": "paired",
    "fixed_power": "planning",
    "pairs_needed": "planning",
    "plan_sequential": "planning",
    "log_ratios": "samples",
    "redecide": "sequential",
    "sequential_decision": "sequential",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # looked up once
    return value


if TYPE_CHECKING:
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
