"""Token counting for everything an agent reads (DESIGN §12: the brief is at most 320 o200k_base tokens).

The count comes from a real o200k_base tokenizer whose merge ranks ship inside the installed
`bpe-openai` wheel, so counting works offline and never downloads anything at run time.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

TOKENIZER = "o200k_base"
TOKENIZER_PACKAGE = "bpe-openai"


def tokenizer_version() -> str:
    """The installed tokenizer package version, recorded beside every count for provenance."""
    try:
        return version(TOKENIZER_PACKAGE)
    except PackageNotFoundError:  # pragma: no cover - the package is a hard dependency
        return "unknown"


@lru_cache(maxsize=1)
def _encoding():
    # Imported lazily: loading the rank tables costs time that `pw --help` should not pay.
    import warnings

    with warnings.catch_warnings():
        # bpe-openai 0.1.x reads its packaged ranks with a deprecated importlib.resources call.
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding(TOKENIZER)
        encoding.encode_ordinary("load")  # the rank tables load on first use, inside this filter
    return encoding


def encode(text: str) -> list[int]:
    """Token ids of `text`; special-token spellings such as '<|endoftext|>' count as plain text."""
    return list(_encoding().encode_ordinary(text))


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in `text`."""
    return len(encode(text))


def provenance() -> dict[str, str]:
    """What produced a token count: tokenizer name, package and its version."""
    return {"tokenizer": TOKENIZER, "package": TOKENIZER_PACKAGE, "version": tokenizer_version()}
