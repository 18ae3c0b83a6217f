"""Slurm through its own commands: `sbatch`, `squeue`, `scontrol`, `scancel`, each through the one
process runner (`adapters.base.run_tool`), with a timeout.

Why the commands and not a library: submitit (the maintained Python driver) pickles a Python
callable and unpickles it on the node, which needs the same interpreter and packages there and hides
what ran; pw's work on a node is already a command (`pw kernel-profile run ...`, `pw evaluate ...`),
and submitit itself shells out to `sbatch`. So the job is a plain batch script a user can read and
resubmit, and these functions only submit, watch and cancel it. Without an accounting database
(`sacct` needs slurmdbd) a finished job is still visible to `scontrol` for `MinJobAge` seconds;
what a task did is also written by the task itself into its own directory, which outlives both.

Parsing is pure (`parse_records`, `parse_queue`) and tested on recorded output.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Mapping, Sequence

import msgspec

from adapters.base import CaptureError, run_tool
from ledger.errors import ToolError

COMMAND_TIMEOUT_S = 60.0
_FIELD = re.compile(r"(\w+)=(\S*)")


class TaskRecord(msgspec.Struct, frozen=True):
    """One array task (or a job without an array: task -1) as the controller describes it."""

    job_id: str          # the array's job id, e.g. "12"
    task: int
    state: str           # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    nodes: str           # the node list, "" while pending
    exit_code: str = ""  # "code:signal", e.g. "0:15" after scancel
    reason: str = ""


def available() -> str | None:
    """None when Slurm's commands are here, else what is missing."""
    missing = [c for c in ("sbatch", "squeue", "scontrol", "scancel") if shutil.which(c) is None]
    return None if not missing else f"{', '.join(missing)} not found (Slurm's client commands; apt-get install slurm-client)"


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    try:
        r = run_tool(list(argv), timeout_s=COMMAND_TIMEOUT_S, env=env)
    except CaptureError as exc:
        raise ToolError(f"slurm: {exc}") from None
    if r.returncode != 0:
        said = (r.stderr.decode(errors="replace").strip() or r.stdout.decode(errors="replace").strip()).splitlines()
        raise ToolError(f"slurm: {' '.join(argv[:2])} failed (exit {r.returncode}): {said[-1] if said else 'no output'}")
    return r.stdout.decode(errors="replace")


def submit(script: str, options: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """`sbatch --parsable OPTIONS SCRIPT`: the job id (without a cluster name)."""
    out = _run(["sbatch", "--parsable", *options, script], env)
    job = out.strip().splitlines()[-1:] or [""]
    job_id = job[0].split(";")[0].strip()
    if not job_id.isdigit():
        raise ToolError(f"slurm: sbatch printed no job id ({out.strip()[:200]!r})")
    return job_id


def queued(job_id: str) -> list[TaskRecord]:
    """The job's tasks still pending or running (`squeue`); [] once every task has ended."""
    return parse_queue(job_id, _run(["squeue", "-h", "-r", "-j", job_id, "-o", "%i|%T|%N"]))


def records(job_id: str) -> list[TaskRecord]:
    """Every task the controller still remembers (`scontrol show job -o`), finished ones included."""
    try:
        out = _run(["scontrol", "show", "job", "-o", job_id])
    except ToolError as exc:
        if "Invalid job id" in str(exc):  # forgotten after MinJobAge: the tasks' own files say the rest
            return []
        raise
    return parse_records(out)


def cancel(job_id: str, task: int | None = None) -> None:
    _run(["scancel", job_id if task is None else f"{job_id}_{task}"])


def wait(job_id: str, poll_s: float) -> None:
    """Until no task of the job is pending or running. Interrupted (Ctrl-C), it cancels the job first:
    a job nobody waits for would hold its nodes and merge into nothing."""
    try:
        while queued(job_id):
            time.sleep(poll_s)
    except KeyboardInterrupt:
        cancel(job_id)
        raise


def parse_queue(job_id: str, text: str) -> list[TaskRecord]:
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        ident, state, nodes = parts
        base, _, task = ident.partition("_")
        if base == job_id:  # "12_[3-7]" is a range still pending, listed as one record (task -1)
            out.append(TaskRecord(job_id, int(task) if task.isdigit() else -1, state, nodes))
    return out


def parse_records(text: str) -> list[TaskRecord]:
    """`scontrol show job -o` prints one line per task record, `Key=Value` separated by spaces."""
    out = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobState" not in fields:
            continue
        job = fields.get("ArrayJobId") or fields.get("JobId", "")
        task = fields.get("ArrayTaskId", "")
        nodes = fields.get("NodeList", "")
        out.append(TaskRecord(job, int(task) if task.isdigit() else -1, fields["JobState"],
                              "" if nodes == "(null)" else nodes, fields.get("ExitCode", ""),
                              "" if fields.get("Reason") == "None" else fields.get("Reason", "")))
    return out
