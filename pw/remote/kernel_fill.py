"""A kernel-profile fill on Slurm: the specs the cache lacks go to a job array, one task per chunk.

Each task runs the same `pw kernel-profile run` on its node (the local executor there: that
node's GPUs, one worker per GPU) into a private ledger and database in its own directory of the
output directory, which the nodes and this host share. When every task has ended, their events
are merged into the caller's cache ledger in one atomic append and the database is rebuilt:

- a spec whose task died (`scancel`, a node failure, the time limit) before its private ledger
  answered it is recorded as failed (`task_died`), so the batch still merges what the others
  measured, and the next `run --remote` (the same command) submits only what is missing;
- a row that another writer stored for one of the job's keys after the job was planned is a
  conflict: nothing is merged, `merge-report.json` lists the conflicts (exit 4); the private
  ledgers stay in the output directory;
- `--fresh` measures the same way and merges nothing.

`plan.json` (what was asked, the cache's head when it was planned), `job.sh` (the batch script, a
user can read and resubmit it), `remote-run.json` (the job id, partition, the tasks' nodes and
states, what ran) and `merge-report.json` are written to the output directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
import uuid
from pathlib import Path

import msgspec

from adapters import slurm
from ledger.errors import ConcurrencyError, InputError, LedgerCorrupt, MergeConflict, ToolError
from ledger.kernel_events import KernelMeasured, KernelMeasurementFailed
from ledger.store import Ledger
from pw.kernel_profile import executor, service
from pw.kernel_profile.cache import Cache, key_for
from pw.kernel_profile.registry import Entry
from pw.remote.config import Remote
from pw.remote.files import read_json, write_json


class Plan(msgspec.Struct, frozen=True):
    batch_id: str
    remote: str
    table: str
    backend: str
    gpu_name: str
    mode: str                 # jit-fill, force or fresh
    db: str                   # the caller's cache
    head_seq: int             # the cache ledger's head when the job was planned
    chunks: list[list[dict]]  # the specs of each array task
    command: list[str]        # what each task runs before its own arguments


def _key(values) -> tuple:
    """A row's key from its argument values, as the database keeps them (bools as 0/1)."""
    return tuple(int(v) if isinstance(v, bool) else v for v in values)


def _gpus(entry: Entry, chunk: list[dict], remote: Remote) -> int:
    if remote.gpus_per_task is not None:
        return remote.gpus_per_task
    return max(entry.gpu_count(entry.args(**a)) for a in chunk)


def plan_chunks(todo: list[dict], tasks: int) -> list[list[dict]]:
    """The specs split over at most `tasks` array tasks, the biggest first to the lightest task."""
    shares = executor.chunk(list(range(len(todo))), [executor.spec_cost(a) for a in todo], min(tasks, len(todo)))
    return [[todo[i] for i in share] for share in shares if share]


def task_script(plan: Plan, out: Path, remote: Remote, entry: Entry) -> str:
    """The batch script every array task runs: its directory, its node's facts, the same pw verb."""
    q = shlex.quote
    args = [*plan.command, "kernel-profile", "run", plan.table, "--backend", plan.backend, "--gpu-name",
            plan.gpu_name, "--json"]
    lines = ["#!/bin/bash", f"# pw kernel-profile fill {plan.batch_id}: {len(plan.chunks)} task(s) of "
             f"{plan.table}/{plan.backend} for gpu_name={plan.gpu_name}", "set -u"]
    lines += list(remote.setup)
    lines += [f"export {k}={q(v)}" for k, v in sorted(remote.env.items())]
    lines += [
        f"cd {q(os.getcwd())}",
        f'task={q(str(out))}/task-"$SLURM_ARRAY_TASK_ID"',
        # Slurm's allocation, as the device indices the local executor may use there.
        'if [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && [ -z "${PW_PROFILE_GPUS:-}" ]; then '
        'export PW_PROFILE_GPUS="$CUDA_VISIBLE_DEVICES"; fi',
        f"export PYTHONPATH={q(str(executor.REPO_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}",
        'printf \'{"node": "%s", "host": "%s", "job_id": "%s", "task": %s, "started_at": %s}\\n\' '
        '"${SLURMD_NODENAME:-}" "$(hostname)" "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}" "$SLURM_ARRAY_TASK_ID" '
        '"$(date +%s.%N)" > "$task/started.json"',
        " ".join(q(a) for a in args) + ' --specs "$task/specs.json" --db "$task/profile.db" '
        '> "$task/result.json" 2> "$task/stderr.txt"',
        "rc=$?",
        'printf \'{"exit_code": %d, "finished_at": %s}\\n\' "$rc" "$(date +%s.%N)" > "$task/finished.json"',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def sbatch_options(plan: Plan, out: Path, remote: Remote, entry: Entry) -> list[str]:
    opts = [f"--job-name=pw-kp-{plan.table}", f"--array=0-{len(plan.chunks) - 1}", f"--time={remote.time}",
            f"--output={out}/task-%a/slurm.out", "--ntasks=1"]
    if remote.partition:
        opts.append(f"--partition={remote.partition}")
    gpus = max(_gpus(entry, c, remote) for c in plan.chunks)
    if gpus:
        opts.append(f"--gres=gpu:{gpus}")
    return opts + list(remote.options)



def _submit(plan: Plan, out: Path, remote: Remote, entry: Entry) -> tuple[str, list[str]]:
    """The job's files, then `sbatch`: (the job id, the sbatch argv). Refused by Slurm (a partition
    that does not exist, more GPUs than a node has), nothing of it is left in the output directory."""
    existed = out.exists()
    written = [out / "plan.json", out / "job.sh", *(out / f"task-{i}" for i in range(len(plan.chunks)))]
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "plan.json", msgspec.to_builtins(plan))
        for i, chunk in enumerate(plan.chunks):
            (out / f"task-{i}").mkdir(exist_ok=True)
            write_json(out / f"task-{i}" / "specs.json", {"specs": chunk})
        script = out / "job.sh"
        script.write_text(task_script(plan, out, remote, entry))
        options = sbatch_options(plan, out, remote, entry)
        try:
            return slurm.submit(str(script), options), ["sbatch", "--parsable", *options, str(script)]
        except ToolError as exc:
            raise ToolError(f"--remote {remote.name}: Slurm refused the job, nothing submitted ({exc})") from None
    except BaseException:
        if not existed:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for path in written:
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        raise


def _wait(job_id: str, remote: Remote, out: Path) -> None:
    try:
        slurm.wait(job_id, remote.poll_s)
    except KeyboardInterrupt:
        raise ToolError(f"interrupted: Slurm job {job_id} cancelled; nothing merged (its files are in {out})") from None


def _task_events(entry: Entry, plan: Plan, out: Path, job_id: str, records: dict[int, slurm.TaskRecord]):
    """(the events each task's private ledger holds, stamped with where they were measured, plus a
    failure for every spec its task never answered; one fact per task for remote-run.json)."""
    events: list = []
    facts = []
    for i, chunk in enumerate(plan.chunks):
        where = out / f"task-{i}"
        started, finished = read_json(where / "started.json"), read_json(where / "finished.json")
        rec = records.get(i)
        node = started.get("node") or (rec.nodes if rec else "")
        state = rec.state if rec else ("COMPLETED" if finished.get("exit_code") == 0 else "UNKNOWN")
        private = Ledger(where / "profile.ledger.jsonl")
        mine: dict[tuple, KernelMeasured | KernelMeasurementFailed] = {}
        unreadable = ""
        try:
            for env in private.events() if private.exists() else []:
                if isinstance(env.data, (KernelMeasured, KernelMeasurementFailed)):
                    mine[_key(env.data.arg_values)] = env.data
        except LedgerCorrupt as exc:  # a task killed mid-append: its specs failed, the others merge
            mine, unreadable = {}, f"; its ledger is unreadable: {exc}"
        stamp = {"slurm_job": f"{job_id}_{i}", "slurm_node": node}
        for a in chunk:
            key = _key(a[n] for n in entry.arg_names)
            ev = mine.get(key)
            if isinstance(ev, KernelMeasured):
                events.append(msgspec.structs.replace(ev, provenance={**ev.provenance, **stamp}, batch_id=plan.batch_id))
            elif ev is not None:
                events.append(msgspec.structs.replace(ev, batch_id=plan.batch_id))
            else:
                why = f"exit {finished['exit_code']}" if "exit_code" in finished else \
                    f"exit code {rec.exit_code}" if rec else "no record of the task"
                events.append(KernelMeasurementFailed(
                    table=plan.table, backend=plan.backend, gpu_name=plan.gpu_name, arg_names=list(entry.arg_names),
                    arg_values=list(key), error="task_died",
                    message=f"Slurm task {job_id}_{i} ended {state} on {node or 'no node'} before answering "
                            f"({why}){unreadable}",
                    batch_id=plan.batch_id))
        facts.append({"task": i, "node": node, "host": started.get("host", ""), "state": state,
                      "exit_code": finished.get("exit_code", rec.exit_code if rec else None),
                      "specs": len(chunk), "answered": sum(isinstance(mine.get(_key(a[n] for n in entry.arg_names)),
                                                                     KernelMeasured) for a in chunk),
                      "started_at": started.get("started_at"), "finished_at": finished.get("finished_at")})
    return events, facts


def conflicts(entry: Entry, plan: Plan, cache: Cache) -> list[dict]:
    """Rows stored for the job's keys by another writer after the job was planned."""
    keys = {_key(a[n] for n in entry.arg_names) for c in plan.chunks for a in c}
    found = []
    for env in cache.ledger.events() if cache.ledger.exists() else []:
        d = env.data
        if env.seq > plan.head_seq and isinstance(d, KernelMeasured) and d.table == plan.table \
                and d.backend == plan.backend and d.gpu_name == plan.gpu_name and _key(d.arg_values) in keys:
            found.append({"seq": env.seq, "at": env.at, "actor": env.actor, "batch_id": d.batch_id,
                          "args": dict(zip(d.arg_names, d.arg_values))})
    return found


def _merge(entry: Entry, plan: Plan, cache: Cache, events: list, out: Path) -> dict:
    """One atomic append of every task's events, or nothing when a row conflicts."""
    for _ in range(3):  # another writer between the check and the append: check again
        head = cache.ledger.head().seq if cache.ledger.exists() else 0
        found = conflicts(entry, plan, cache)
        report = {"batch_id": plan.batch_id, "merged": False, "events": len(events), "conflicts": found,
                  "cache_ledger": str(cache.ledger.path), "planned_at_seq": plan.head_seq, "head_seq": head}
        if found:
            write_json(out / "merge-report.json", report)
            raise MergeConflict(
                f"{len(found)} row(s) for this job's specs were stored in {cache.db} while Slurm job ran "
                f"(first: {found[0]['args']}, seq {found[0]['seq']}); nothing merged; see {out / 'merge-report.json'}")
        try:
            cache.ledger.append(events, expected_seq=head, actor="kernel-profile", key=f"slurm-merge:{plan.batch_id}")
        except ConcurrencyError:
            continue
        cache.rebuild()
        report["merged"] = True
        write_json(out / "merge-report.json", report)
        return report
    raise ToolError(f"{cache.ledger.path}: other writers kept appending; nothing merged (run the same command again)")



def fill(entry: Entry, specs: list, gpu_name: str | None, cache: Cache, remote: Remote, out: Path,
         command: list[str], *, force: bool, fresh: bool) -> dict:
    """`pw kernel-profile run --remote NAME`: the same answer as a local run, measured on Slurm."""
    if not gpu_name:
        raise InputError(f"--remote {remote.name}: --gpu-name is required (the GPUs are on the cluster's "
                         "nodes, not here, so their name cannot be read from this host)")
    gpu = service.resolve_gpu(gpu_name)
    if not fresh:
        cache.check_writable()
        cache.check()
    mode = "fresh" if fresh else "force" if force else "jit-fill"
    before = service.count_missing(entry, specs, gpu, cache) if not fresh else None
    todo = list(service.to_measure(entry, specs, gpu, cache, everything=force or fresh).values())
    plan = Plan(uuid.uuid4().hex, remote.name, entry.table, entry.backend, gpu.name, mode, str(cache.db),
                cache.ledger.head().seq if cache.ledger.exists() else 0, plan_chunks(todo, remote.tasks) if todo else [],
                [remote.python or sys.executable, *command])
    run_facts: dict = {"remote": remote.name, "kind": remote.kind, "partition": remote.partition or None,
                       "batch_id": plan.batch_id, "job_id": None, "tasks": [], "nodes": [],
                       "config": msgspec.to_builtins(remote), "output_dir": str(out)}
    events: list = []
    if plan.chunks:
        t0 = time.monotonic()
        job_id, argv = _submit(plan, out, remote, entry)
        run_facts.update(job_id=job_id, sbatch=argv, submitted_at=time.time())
        write_json(out / "remote-run.json", run_facts)  # the job id is on disk before the wait: scancel it by hand
        _wait(job_id, remote, out)
        records = {r.task: r for r in slurm.records(job_id)}
        events, tasks = _task_events(entry, plan, out, job_id, records)
        run_facts.update(tasks=tasks, nodes=sorted({t["node"] for t in tasks if t["node"]}),
                         finished_at=time.time(), wall_s=round(time.monotonic() - t0, 3))
        write_json(out / "remote-run.json", run_facts)
    measured = [e for e in events if isinstance(e, KernelMeasured)]
    failed = [e for e in events if isinstance(e, KernelMeasurementFailed)]
    if fresh:
        body = _fresh_body(entry, specs, gpu, cache, measured, failed)
    else:
        if events:
            run_facts["merge"] = _merge(entry, plan, cache, events, out)
        body = service.query(entry, specs, gpu, cache)
        body["persisted"] = bool(events)
        why = {_key(e.arg_values): e for e in failed}
        for r in body["results"]:
            f = why.get(_key(r["args"][n] for n in entry.arg_names))
            if f is not None and r["status"] != "ok":
                r["error"], r["message"] = f.error, f.message
    body.update({"mode": mode, "measured_count": len(events), "failed_count": len(failed),
                 "missing_before": before["missing_count"] if before else None,
                 "batch_id": plan.batch_id if events else None, "remote": run_facts, "output_dir": str(out)})
    return body


def _fresh_body(entry: Entry, specs: list, gpu, cache: Cache, measured: list, failed: list) -> dict:
    """--fresh: the tasks' measurements as they came, one result per spec, nothing merged."""
    got = {_key(e.arg_values): e for e in [*failed, *measured]}
    results = []
    for i, s in enumerate(specs):
        e = got.get(key_for(s))
        args = msgspec.structs.asdict(s)
        if isinstance(e, KernelMeasured):
            results.append(service.fresh_result(i, args, e.metrics, e.stats, e.telemetry, e.provenance))
        else:
            results.append(service.missing_result(i, args, *((e.error, e.message) if e is not None else ())))
    return service.fresh_answer(entry, specs, gpu, cache, results)
