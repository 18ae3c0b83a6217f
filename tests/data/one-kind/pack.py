"""Pack what the judge reads of recorded runs: each run's ledger and the normalized profiles its
verdicts were judged from (`pw.rules.judge.profiles_needed`), nothing else of raw/ (the perf
scripts of every timed run are tens of MB; the judge never reads them).

Usage: .venv/bin/python tests/data/one-kind/pack.py OUT.tgz RUN_DIR [RUN_DIR ...]
The archive holds NAME/ledger.jsonl and NAME/raw/xx/sha per run, NAME being the run's workload.
"""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

from ledger import events as ev
from ledger.store import Ledger
from pw.rules.judge import profiles_needed


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def pack(out: Path, runs: list[Path]) -> None:
    with tarfile.open(out, "w:gz") as tar:
        for run in runs:
            envelopes = Ledger(run / "ledger.jsonl").events()
            name = next(e.data.contract.name for e in envelopes if isinstance(e.data, ev.RunStarted))
            judged = {e.data.id for e in envelopes if isinstance(e.data, ev.VerdictReached)}
            _add(tar, f"{name}/ledger.jsonl", (run / "ledger.jsonl").read_bytes())
            for sha in sorted({s for cid in judged for s in profiles_needed(envelopes, cid)}):
                _add(tar, f"{name}/raw/{sha[:2]}/{sha}", (run / "raw" / sha[:2] / sha).read_bytes())


if __name__ == "__main__":
    pack(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
