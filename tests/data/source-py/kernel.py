"""Test kernels: list-membership, set-membership, attribute lookups, nested loops."""

STOPWORDS = ["a", "an", "the", "of", "to", "in", "on", "at", "by", "for"]


def dedupe(items):
    seen = []
    out = []
    for item in items:
        if item not in seen:
            seen.append(item)
            out.append(item)
    for item in items:
        position = seen.index(item)
        out[position] = item
    return out


def dedupe_set(items):
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def content_words(words):
    kept = []
    for word in words:
        if word not in STOPWORDS and word not in ("x", "y"):
            kept.append(word)
    return kept


def close_pairs(points, limit):
    count = 0
    for p in points:
        for q in points:
            if abs(p - q) < limit:
                count += 1
    for r in range(3):
        for s in range(4):
            count += r * s
    return count


class Grid:
    def __init__(self, cells, scale):
        self.cells = cells
        self.scale = scale

    def total(self):
        acc = 0.0
        for cell in self.cells:
            acc += cell * self.scale.factor + self.scale.offset.value
        return acc

    def reset(self):
        self.cells = []
