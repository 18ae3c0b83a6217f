"""`--output-dir`: an immutable snapshot of one call (request.json, results.json, curve.json,
job.meta.json). A directory that already holds a snapshot is refused before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ledger.errors import InputError, ToolError

FILES = ("request.json", "results.json", "curve.json", "job.meta.json")


def check_free(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--output-dir {out}: exists and is not a directory")
    taken = [f for f in FILES if (out / f).exists()]
    if taken:
        raise InputError(f"--output-dir {out}: already holds a snapshot ({', '.join(taken)}); "
                         "snapshots are immutable, choose a fresh directory")


def curve(arg_names: tuple[str, ...], metric_family: tuple[str, ...], results: list[dict]) -> dict:
    """Varying args in declaration order become axes (x, y, then facets); constants go to fixedArgs."""
    varying = [n for n in arg_names if len({json.dumps(r["args"][n]) for r in results}) > 1]
    fixed = {n: results[0]["args"][n] for n in arg_names if n not in varying} if results else {}
    points = []
    for r in results:
        p = {n: r["args"][n] for n in varying}
        p["status"] = r["status"]
        for m in metric_family:
            p[m] = (r.get("metrics") or {}).get(m)
        points.append(p)
    return {
        "axes": {"x": varying[0] if varying else None, "y": varying[1] if len(varying) > 1 else None,
                 "facets": varying[2:]},
        "fixedArgs": fixed, "metrics": list(metric_family), "points": points,
    }


def write(out: Path, stored: str, docs: dict[str, dict]) -> list[str]:
    """Write each file once (O_EXCL: never over an existing one) and make it read-only.

    All four or none: a failure part-way removes what this call wrote, and the directory if this
    call made it, and says so in one line (`stored` says what the call kept regardless).
    """
    made = [p for p in (out, *out.parents) if not p.exists()]
    written: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in FILES:
            path = out / name
            data = (json.dumps(docs[name], indent=2, sort_keys=False) + "\n").encode()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            written.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        for d in made:  # innermost first
            try:
                d.rmdir()
            except OSError:
                break
        raise ToolError(f"--output-dir {out}: snapshot not written ({exc.strerror}); {stored}nothing of the "
                        "snapshot was left behind") from None
    return [str(p) for p in written]
