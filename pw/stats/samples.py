"""Checks on samples and parameters, and the per-pair log ratios every analysis starts from."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .errors import StatsInputError


def as_times(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-D float64 copy of run times, each finite and > 0."""
    arr = _finite_vector(name, values, "numbers (seconds)")
    nonpos = arr <= 0
    if nonpos.any():
        i = int(np.argmax(nonpos))
        raise StatsInputError(f"{name} must be > 0 seconds, got {float(arr[i])!r} at index {i}")
    return arr


def paired_times(
    baseline_s: Sequence[float] | np.ndarray,
    candidate_s: Sequence[float] | np.ndarray,
    *,
    min_pairs: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Both arms as checked arrays of equal length, at least `min_pairs` long."""
    base = as_times("baseline_s", baseline_s)
    cand = as_times("candidate_s", candidate_s)
    if base.size != cand.size:
        raise StatsInputError(
            f"baseline_s and candidate_s must pair up, got {base.size} and {cand.size} times"
        )
    if base.size < min_pairs:
        raise StatsInputError(f"need at least {min_pairs} pairs, got {base.size}")
    return base, cand


def log_ratios(baseline_s: Sequence[float], candidate_s: Sequence[float]) -> np.ndarray:
    """Per-pair log(baseline/candidate): positive where the candidate ran faster.

    Checks the times as `paired_times` does, but accepts zero or one pair (for sequential use).
    """
    base, cand = paired_times(baseline_s, candidate_s, min_pairs=0)
    return np.log(base) - np.log(cand)


def as_log_ratios(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-D float64 copy of log ratios, each finite."""
    return _finite_vector("log_ratios", values, "numbers")


def _finite_vector(name: str, values, what: str) -> np.ndarray:
    """A 1-D float64 copy of `values` (the caller's buffer is never kept), each finite."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsInputError(f"{name} must be a sequence of {what}: {exc}") from None
    if arr.ndim != 1:
        raise StatsInputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise StatsInputError(f"{name} must be finite, got {float(arr[i])!r} at index {i}")
    return arr


def check_open_unit(name: str, value: float) -> float:
    """A number strictly between 0 and 1 (a confidence, a power, an alpha)."""
    if not _is_real(value) or not 0.0 < float(value) < 1.0:
        raise StatsInputError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def check_min_effect(value: float) -> float:
    if not _is_real(value) or not 0.0 <= float(value) < 1.0:
        raise StatsInputError(f"min_effect must be a fraction in [0, 1), e.g. 0.01 for 1%, got {value!r}")
    return float(value)


def check_positive(name: str, value: float) -> float:
    if not _is_real(value) or not float(value) > 0.0:
        raise StatsInputError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_int(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise StatsInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _is_real(value: object) -> bool:
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )
