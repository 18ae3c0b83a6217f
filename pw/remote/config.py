"""Where work runs: the remotes of `remote.yaml`, chosen by `--remote NAME`, one field changed for one
call by `--remote-set KEY=VALUE`.

The file is the user's (never written by pw). It is found at `--remote-config PATH`, else
`$PW_REMOTE_CONFIG`, else `./remote.yaml`, else `~/.config/profileweaver/remote.yaml`;
`remote.example.yaml` at the checkout's root lists every field. One remote is always there without a
file: `local`, today's executor (the idle-GPU pool, the local campaign runner).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import msgspec
import yaml

from ledger.errors import InputError


class Remote(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One place to run. For `slurm`: a job array for a kernel-profile fill (one task per chunk of
    specs), one exclusive job for a campaign."""

    kind: Literal["local", "slurm"]
    partition: str = ""             # sbatch --partition; "" the cluster's default
    time: str = "01:00:00"          # sbatch --time, per task
    tasks: int = 8                  # a fill's specs go to at most this many array tasks
    gpus_per_task: int | None = None  # None: each task asks for the GPUs its specs need; 0: none
    options: list[str] = []         # more sbatch options, e.g. ["--account=hpc123", "--constraint=h200"]
    setup: list[str] = []           # shell lines each task runs first, e.g. ["module load cuda/12.4"]
    env: dict[str, str] = {}        # environment of each task
    python: str = ""                # the interpreter on the nodes; "" this one (the checkout must be shared)
    poll_s: float = 1.0             # how often the job is looked at while it runs
    name: str = ""                  # filled from the file's key


class _File(msgspec.Struct, forbid_unknown_fields=True):
    remotes: dict[str, dict] = {}


LOCAL = Remote(kind="local", name="local")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The seed's spelling of the Slurm fields (`--remote-set launch.slurm.time=...`) is accepted too.
_SEED_PREFIX = "launch.slurm."


def config_path(explicit: str | None) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise InputError(f"--remote-config {explicit}: no such file (expected a remote.yaml)")
        return path
    env = os.environ.get("PW_REMOTE_CONFIG")
    if env:
        if not Path(env).is_file():
            raise InputError(f"PW_REMOTE_CONFIG={env}: no such file (expected a remote.yaml)")
        return Path(env)
    for candidate in (Path("remote.yaml"), Path.home() / ".config" / "profileweaver" / "remote.yaml"):
        if candidate.is_file():
            return candidate
    return None


def _coerce(name: str, raw: dict, where: str) -> Remote:
    try:
        remote = msgspec.convert({**raw, "name": name}, Remote)
    except msgspec.ValidationError as exc:
        raise InputError(f"{where}: remote {name!r}: {exc} (fields: {', '.join(Remote.__struct_fields__[:-1])})") from None
    if remote.tasks < 1:
        raise InputError(f"{where}: remote {name!r}: tasks {remote.tasks}: expected at least 1")
    bad = [k for k in remote.env if not _ENV_NAME.fullmatch(k)]
    if bad:  # each becomes `export NAME=...` in the job's script
        raise InputError(f"{where}: remote {name!r}: env name {bad[0]!r}: expected a shell variable name "
                         "(letters, digits, _; not starting with a digit)")
    if remote.poll_s <= 0:
        raise InputError(f"{where}: remote {name!r}: poll_s {remote.poll_s}: expected a positive number of seconds")
    return remote


def load(name: str, *, config: str | None = None, overrides: list[str] | None = None) -> Remote:
    """The remote called `name`, with `overrides` ("key=value", the value read as YAML) applied."""
    path = config_path(config)
    raw: dict | None = None
    where = str(path) if path else "remote.yaml"
    if path is not None:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
            remotes = msgspec.convert(doc, _File).remotes
        except (yaml.YAMLError, msgspec.ValidationError) as exc:
            raise InputError(f"{path}: not a remote config ({str(exc).splitlines()[0]}); expected "
                             "'remotes: {NAME: {kind: slurm, ...}}' (see remote.example.yaml)") from None
        raw = remotes.get(name)
        known = sorted(remotes)
    else:
        known = []
    if raw is None and name != "local":
        found = f"remotes in {path}: {', '.join(known) or 'none'}" if path else \
            "no remote.yaml found (./remote.yaml, ~/.config/profileweaver/remote.yaml, $PW_REMOTE_CONFIG)"
        raise InputError(f"--remote {name}: not a configured remote ({found}; 'local' is always there)")
    raw = dict(raw if raw is not None else msgspec.to_builtins(LOCAL))
    for item in overrides or []:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix(_SEED_PREFIX)
        if not sep or not key:
            raise InputError(f"--remote-set {item!r}: expected KEY=VALUE, e.g. time=00:30:00")
        if key not in Remote.__struct_fields__ or key == "name":
            raise InputError(f"--remote-set {item!r}: unknown field {key!r} (fields: "
                             f"{', '.join(Remote.__struct_fields__[:-1])})")
        try:
            raw[key] = value if key in ("time", "partition", "python") else yaml.safe_load(value)
        except yaml.YAMLError:
            raise InputError(f"--remote-set {item!r}: the value is not YAML") from None
    raw.pop("name", None)
    return _coerce(name, raw, f"--remote-set on {where}" if overrides else where)
