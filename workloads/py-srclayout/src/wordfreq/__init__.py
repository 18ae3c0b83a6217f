"""wordfreq: distinct words and their counts in a deterministic generated text."""

from wordfreq.text import generate_words
from wordfreq.vocab import count_words

__all__ = ["count_words", "generate_words"]
