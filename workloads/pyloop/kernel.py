"""kernel.py -- editable kernel of the pyloop workload.

Planted bottleneck (see README.md): ``histogram`` keeps the distinct keys in a
list and finds each key with ``key in keys`` and ``keys.index(key)``: two
linear scans per item, O(n * u) for n items and u distinct keys.  A dict
gives O(1) lookups with the same first-occurrence order.
"""


def histogram(items):
    """Count occurrences of each item.

    Returns a list of (key, count) pairs in order of first occurrence.
    """
    keys = []
    counts = []
    for item in items:
        if item not in keys:
            keys.append(item)
            counts.append(0)
        counts[keys.index(item)] += 1
    return list(zip(keys, counts))


def pair_count(hist, modulus):
    """Number of unordered pairs of items whose keys sum to 0 mod `modulus`."""
    by_residue = [0] * modulus
    for key, count in hist:
        by_residue[key % modulus] += count
    total = by_residue[0] * (by_residue[0] - 1) // 2
    for r in range(1, (modulus + 1) // 2):
        total += by_residue[r] * by_residue[modulus - r]
    if modulus % 2 == 0:
        half = by_residue[modulus // 2]
        total += half * (half - 1) // 2
    return total
