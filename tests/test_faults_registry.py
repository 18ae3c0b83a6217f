"""The fault-injection suite's table: at least 40 faults, across the verbs a user meets them in,
every row named once. A run of the suite closes with `fault-injection: N faults (...)`
(tests/conftest.py `pytest_terminal_summary`)."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path

VERBS = {"start", "prepare", "evaluate", "confirm", "audit", "repair"}


def all_faults():
    rows = []
    for path in sorted(Path(__file__).parent.glob("test_faults_*.py")):
        module = importlib.import_module(f"tests.{path.stem}")
        rows += getattr(module, "FAULTS", [])
    return rows


def test_the_registry_holds_at_least_40_faults_across_the_verbs():
    rows = all_faults()
    names = Counter(f.name for f in rows)
    assert not [n for n, k in names.items() if k > 1], "a fault name is used twice"
    per_verb = Counter(f.verb for f in rows)
    assert VERBS <= set(per_verb), f"verbs without a fault: {VERBS - set(per_verb)}"
    assert len(rows) >= 40, f"fault-injection: {len(rows)} faults, expected at least 40"
    # the kinds the suite promises: bad input (2), the machine (3), a failed check (1), killed (-9)
    assert {2, 3, 1, -9} <= {f.code for f in rows}
    print(f"fault-injection: {len(rows)} faults in the registry ({dict(sorted(per_verb.items()))})")
