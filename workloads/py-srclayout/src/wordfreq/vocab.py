"""Counting distinct words, in first-seen order."""


def count_words(words: list[str]) -> list[tuple[str, int]]:
    vocab: list[str] = []
    counts: list[int] = []
    for w in words:
        # A list lookup: linear in the size of the vocabulary for every word.
        if w in vocab:
            counts[vocab.index(w)] += 1
        else:
            vocab.append(w)
            counts.append(1)
    return list(zip(vocab, counts))
