"""Seeded interleaving of baseline (A) and candidate (B) runs.

Each pair runs both arms back to back; which one runs first is drawn so that a drift over run order
(warm-up, thermal throttling, a neighbour's job) adds noise to the log ratios instead of bias.
"""

from __future__ import annotations

import numpy as np

from .errors import StatsInputError
from .model import PairOrder

_BLOCK_ORDERS: tuple[tuple[PairOrder, PairOrder], tuple[PairOrder, PairOrder]] = (
    ("AB", "BA"),
    ("BA", "AB"),
)


def interleaved_order(n_pairs: int, seed: int) -> list[PairOrder]:
    """The A/B order of `n_pairs` pairs, drawn from `numpy.random.Generator(PCG64(seed))`.

    Blocked randomization in blocks of two pairs: each block is ("AB", "BA") or ("BA", "AB") with
    probability 1/2, so any prefix holds at most one more "AB" than "BA" (or the reverse) and a
    linear drift cancels within each block. One uniform double is drawn per block, so the first `n`
    pairs are the same whatever `n_pairs` a sequential campaign was planned for.
    """
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, (int, np.integer)) or n_pairs < 0:
        raise StatsInputError(f"n_pairs must be a non-negative integer, got {n_pairs!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise StatsInputError(f"seed must be a non-negative integer, got {seed!r}")
    n_blocks = (int(n_pairs) + 1) // 2
    draws = np.random.Generator(np.random.PCG64(int(seed))).random(n_blocks)
    order: list[PairOrder] = []
    for u in draws:
        order.extend(_BLOCK_ORDERS[int(u >= 0.5)])
    return order[: int(n_pairs)]


def run_positions(order: list[PairOrder] | tuple[PairOrder, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Run positions (0-based, over the whole campaign) of each pair's baseline and candidate run."""
    first_is_a = np.array([o == "AB" for o in order], dtype=bool)
    base = 2 * np.arange(len(order))
    return base + np.where(first_is_a, 0, 1), base + np.where(first_is_a, 1, 0)


_TRIPLE_BLOCKS: tuple[tuple[str, str, str], ...] = (("ABC", "BCA", "CAB"), ("ACB", "CBA", "BAC"))


def interleaved_triples(n: int, seed: int) -> list[str]:
    """The run order of ``n`` triples (reference A, candidate B, a third arm C), seeded like
    ``interleaved_order``: blocks of three triples form a Latin square (each arm runs once in each
    position per block), one of the two squares drawn per block, then the block's rows shuffled."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise StatsInputError(f"n must be a non-negative integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise StatsInputError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    out: list[str] = []
    for _ in range((int(n) + 2) // 3):
        square = list(_TRIPLE_BLOCKS[int(rng.random() >= 0.5)])
        out.extend(square[i] for i in rng.permutation(3))
    return out[: int(n)]


def pair_order_of(triple: str) -> PairOrder:
    """Which of A and B ran first in a triple's order ("AB" or "BA")."""
    return "AB" if triple.index("A") < triple.index("B") else "BA"
