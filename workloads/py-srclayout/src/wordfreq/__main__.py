"""`python -m wordfreq`: count the words of a 40,000-word generated text and print a summary."""

from wordfreq import count_words, generate_words


def main() -> None:
    words = generate_words(40_000)
    counted = count_words(words)
    print(f"words {len(words)} distinct {len(counted)}")
    for word, n in sorted(counted, key=lambda wc: (-wc[1], wc[0]))[:20]:
        print(f"{word} {n}")


if __name__ == "__main__":
    main()
