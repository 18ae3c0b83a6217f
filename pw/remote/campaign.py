"""`pw evaluate RUN ID --remote NAME`, `pw confirm RUN ID --fresh --remote NAME`: the same command,
without `--remote`, run on a node Slurm allocates whole (`--exclusive`: nothing else shares it while
the arms are timed).

The run directory must be on a filesystem the node shares. The command on the node is the
ordinary one: it appends its events to the run's ledger as it goes (the ledger's lock and expected
sequence numbers hold across machines that share the file), and every campaign it times records
the node's own facts (`TimingConditions.node`: its hostname and CPUs, the job, the partition), which
the contention reading, the reproducible gate and the report use. Killed on the node, the same
command resumes the attempt from what the ledger holds, here or there.

The job's files (`job.sh`, the node's stdout and stderr, `remote-run.json`) go to
`RUN/remote/<verb>-<id>-<n>/`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

from adapters import slurm
from ledger.errors import ToolError
from pw.remote.config import Remote
from pw.remote.files import read_json, write_json

# Flags that choose where the command runs: the node runs the command without them.
_REMOTE_FLAGS = ("--remote", "--remote-set", "--remote-config")


def local_argv(argv: list[str]) -> list[str]:
    """`argv` without the remote flags and their values (`--remote X` and `--remote=X` forms)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in _REMOTE_FLAGS:
            skip = True
            continue
        if a.split("=", 1)[0] in _REMOTE_FLAGS:
            continue
        out.append(a)
    return out


def _job_dir(run_dir: Path, label: str) -> Path:
    """A new directory under RUN/remote/ named after the verb and ids (any other character made "_")."""
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:80].lstrip(".") or "job"
    base = run_dir / "remote"
    base.mkdir(exist_ok=True)
    n = 1 + sum(1 for p in base.iterdir() if p.name.startswith(label + "-"))
    while True:
        where = base / f"{label}-{n}"
        try:
            where.mkdir()
            return where
        except FileExistsError:
            n += 1


def script(remote: Remote, command: list[str], where: Path) -> str:
    q = shlex.quote
    lines = ["#!/bin/bash", f"# pw on a Slurm node: {' '.join(q(c) for c in command)}", "set -u", *remote.setup]
    lines += [f"export {k}={q(v)}" for k, v in sorted(remote.env.items())]
    lines += [
        f"cd {q(os.getcwd())}",
        "export PW_SLURM_EXCLUSIVE=1",  # recorded with the node's facts: the job held the whole node
        f"where={q(str(where))}",
        'printf \'{"node": "%s", "host": "%s", "job_id": "%s", "started_at": %s}\\n\' "${SLURMD_NODENAME:-}" '
        '"$(hostname)" "$SLURM_JOB_ID" "$(date +%s.%N)" > "$where/started.json"',
        " ".join(q(c) for c in command) + ' > "$where/stdout" 2> "$where/stderr"',
        "rc=$?",
        'printf \'{"exit_code": %d, "finished_at": %s}\\n\' "$rc" "$(date +%s.%N)" > "$where/finished.json"',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"



def run_on_node(remote: Remote, run_dir: Path, label: str, command: list[str]) -> int:
    """Submit `command` as one exclusive job, wait, relay its output; its exit status is ours."""
    where = _job_dir(run_dir.resolve(), label)
    (where / "job.sh").write_text(script(remote, command, where))
    options = [f"--job-name=pw-{label}", "--nodes=1", "--ntasks=1", "--exclusive", f"--time={remote.time}",
               f"--output={where}/slurm.out"]
    if remote.partition:
        options.append(f"--partition={remote.partition}")
    if remote.gpus_per_task:
        options.append(f"--gres=gpu:{remote.gpus_per_task}")
    options += list(remote.options)
    facts: dict = {"remote": remote.name, "kind": remote.kind, "partition": remote.partition or None,
                   "command": command, "sbatch": ["sbatch", "--parsable", *options, str(where / "job.sh")]}
    try:
        job = slurm.submit(str(where / "job.sh"), options)
    except ToolError as exc:
        shutil.rmtree(where, ignore_errors=True)
        raise ToolError(f"--remote {remote.name}: Slurm refused the job, nothing submitted ({exc})") from None
    facts.update(job_id=job, submitted_at=time.time())
    write_json(where / "remote-run.json", facts)
    sys.stderr.write(f"pw: Slurm job {job} ({remote.name}) runs: pw {' '.join(command[3:])}; files in {where}\n")
    try:
        slurm.wait(job, remote.poll_s)
    except KeyboardInterrupt:
        raise ToolError(f"interrupted: Slurm job {job} cancelled; the run's ledger holds every step it completed "
                        "(run the same command again to continue)") from None
    started, finished = read_json(where / "started.json"), read_json(where / "finished.json")
    record = next(iter(slurm.records(job)), None)
    facts.update(node=started.get("node") or (record.nodes if record else ""), host=started.get("host", ""),
                 state=record.state if record else None, exit_code=finished.get("exit_code"),
                 finished_at=time.time())
    write_json(where / "remote-run.json", facts)
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        path = where / name
        if path.is_file():
            stream.write(path.read_text(errors="replace"))
            stream.flush()
    if "exit_code" not in finished:
        state = record.state if record else "without a record"
        raise ToolError(f"Slurm job {job} ended {state} on {facts['node'] or 'no node'} before pw finished there; "
                        f"the run's ledger holds every step it completed; its files are in {where}")
    return int(finished["exit_code"])
