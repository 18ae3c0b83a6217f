"""Imports an evaluation needs only after its campaign, loaded on a thread while the main one waits
for the build and the oracle's runs: the paired analysis's scipy.stats (0.55 s here) and the
refreshed brief's tokenizer (0.5 s). About 1 s off a `pw evaluate` of 8 s.

``wait`` is called before the first timed run of every campaign (``pw.app.campaign.run_pairs``),
so nothing of pw's own competes with a timed program for a CPU. A failed import here is left for
the main thread to meet again where it needs the module, and to report there.
"""

from __future__ import annotations

import threading

_thread: threading.Thread | None = None


def _load() -> None:
    try:
        from pw.agent.tokens import count_tokens
        from pw.stats import paired  # noqa: F401  (scipy.stats)

        count_tokens("warm")  # the o200k ranks load on first use
    except Exception:  # noqa: BLE001 - the main thread imports it again and says what failed
        return


def start() -> None:
    """Begin loading (once per process)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_load, name="pw-warm-imports")
        _thread.start()


def wait() -> None:
    """Return once the loading begun by ``start`` is done (at once when none was begun)."""
    if _thread is not None:
        _thread.join()
