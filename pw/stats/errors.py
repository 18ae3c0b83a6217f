"""The one error the statistics engine raises for inputs it cannot judge."""

from __future__ import annotations

from ledger.errors import InputError


class StatsInputError(InputError, ValueError):
    """Samples or parameters that no statistic can be computed from (too few pairs, zero or negative
    times, NaN/inf, mismatched lengths, parameters out of range).

    A `ValueError` for callers that only know the standard library, and an `InputError` of the
    ProfileWeaver error family, so the CLI renders it as one line with exit code 2.
    """
