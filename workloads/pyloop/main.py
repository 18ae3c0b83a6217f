"""main.py -- harness of the pyloop workload (NOT editable).

usage: python3 main.py NITEMS NKEYS SEED

Generates NITEMS pseudo-random keys in [0, NKEYS) from SEED with a fixed
64-bit generator (independent of Python's ``random`` module, so the output
never changes across Python versions), builds their histogram with
kernel.histogram, and prints all of it: every (key, count) pair in order of
first occurrence, then the pair count of kernel.pair_count.  The oracle
compares the whole histogram, not a summary of it.  No timing is printed.
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
    for key, count in hist:
        print(key, count)
    print("pairs_mod_97", kernel.pair_count(hist, 97))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
