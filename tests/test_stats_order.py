"""Seeded, recorded A/B order."""

from __future__ import annotations

import numpy as np
import pytest

from pw.stats import StatsInputError, interleaved_order
from pw.stats.order import run_positions


def test_deterministic_and_seed_dependent():
    assert interleaved_order(50, 3) == interleaved_order(50, 3)
    assert interleaved_order(50, 3) != interleaved_order(50, 4)


def test_prefix_does_not_depend_on_the_planned_length():
    long = interleaved_order(201, 17)
    for n in (0, 1, 2, 5, 6, 77, 200):
        assert interleaved_order(n, 17) == long[:n]


def test_blocks_of_two_are_balanced_and_both_orders_occur():
    order = interleaved_order(400, 5)
    assert set(order) == {"AB", "BA"}
    for i in range(0, 400, 2):
        assert {order[i], order[i + 1]} == {"AB", "BA"}
    first_blocks = [order[i] for i in range(0, 400, 2)]
    assert 60 < first_blocks.count("AB") < 140  # a fair coin per block, not a fixed pattern


def test_run_positions():
    a, b = run_positions(["AB", "BA", "BA"])
    assert list(a) == [0, 3, 5] and list(b) == [1, 2, 4]
    assert np.all(np.sort(np.concatenate([a, b])) == np.arange(6))


@pytest.mark.parametrize(("n", "seed"), [(-1, 0), (3, -2), (2.5, 0), (3, "x"), (True, 0)])
def test_bad_arguments(n, seed):
    with pytest.raises(StatsInputError):
        interleaved_order(n, seed)
