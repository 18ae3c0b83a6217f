"""The job files pw writes beside a Slurm job and reads back from it: JSON, replaced atomically."""

from __future__ import annotations

import json
from pathlib import Path


def write_json(path: Path, body: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> dict:
    """What a task wrote, or {} when it never got that far (killed, cancelled, its node gone)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
