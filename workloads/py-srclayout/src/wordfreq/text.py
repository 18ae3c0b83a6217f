"""A deterministic stream of pseudo-words (a linear congruential generator, no `random`)."""

_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "an", "el")


def generate_words(n: int, seed: int = 7) -> list[str]:
    state = seed
    words = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        k = 1 + (state >> 60) % 4
        s = state >> 8
        parts = []
        for _ in range(k):
            parts.append(_SYLLABLES[s % len(_SYLLABLES)])
            s //= len(_SYLLABLES)
        words.append("".join(parts))
    return words
