"""main.py -- harness of the pyloop workload (NOT editable).

usage: python3 main.py NITEMS NKEYS SEED

Generates NITEMS pseudo-random keys in [0, NKEYS) from SEED with a fixed
64-bit generator (independent of Python's ``random`` module, so the output
never changes across Python versions), builds their histogram with
kernel.histogram, and prints integer summaries.  No timing is printed.
"""

import sys

import kernel

MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def make_items(nitems, nkeys, seed):
    state = seed & MASK64
    items = []
    for _ in range(nitems):
        state, a = splitmix64(state)
        # skewed: the smaller of two draws, so low keys are more frequent
        state, b = splitmix64(state)
        items.append(min(a % nkeys, b % nkeys))
    return items


def main(argv):
    if len(argv) != 4:
        print("usage: python3 main.py NITEMS NKEYS SEED", file=sys.stderr)
        return 2
    nitems, nkeys, seed = int(argv[1]), int(argv[2]), int(argv[3])
    items = make_items(nitems, nkeys, seed)
    hist = kernel.histogram(items)

    print("items", nitems)
    print("distinct", len(hist))
    print("total", sum(c for _, c in hist))
    print("first_keys", " ".join(str(k) for k, _ in hist[:8]))
    top = sorted(hist, key=lambda kc: (-kc[1], kc[0]))[:5]
    print("top", " ".join(f"{k}:{c}" for k, c in top))
    print("weighted", sum((i + 1) * k * c for i, (k, c) in enumerate(hist)) % 1000000007)
    print("pairs_mod_97", kernel.pair_count(hist, 97))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
