"""`pw kernel-profile list | count-missing | query | run | measure | repair` (docs/kernel-profile.md, seed 003).

Exit codes: 0 success (also for a query that finds rows missing: that is an answer), 1 when `run`
leaves rows missing or a measurement fails, 2 for bad input (a read-only or damaged cache among it),
3 when the machine or a tool failed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from ledger.errors import InputError
from pw.cli.common import add_remote_args, chosen_remote, print_json, print_text


def _settings(args):
    from pw.kernel_profile.protocol import Settings

    def env_float(name: str, default: float) -> float:
        raw = os.environ.get(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"{name}={raw!r}: expected a number of seconds") from None
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{name}={raw!r}: expected a positive, finite number of seconds")
        return value

    return Settings(
        clear_l2=not getattr(args, "no_clear_l2", False),
        cuda_graph=bool(getattr(args, "cuda_graph", False)) or os.environ.get("PW_PROFILE_CUDA_GRAPH") == "1",
        timeout_s=env_float("PW_PROFILE_TIMEOUT_S", 10.0),
    )


def _entry_and_specs(args):
    from pw.kernel_profile import registry, specs

    entry = registry.lookup(args.table, args.backend)
    return entry, specs.parse(entry, spec=args.spec, specs_path=args.specs)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


def _table_text(entry, body: dict) -> str:
    head = [*entry.arg_names, "status", *entry.metric_family]
    lines = [
        f"{entry.table}/{entry.backend} gpu_name={body['gpu_name']} ({body['gpu_name_source']}) db={body['db']}",
        f"specs={body['spec_count']} missing={body['missing_count']} unverified={body['unverified_count']}",
        "  ".join(head),
    ]
    for r in body["results"][:50]:
        m = r.get("metrics") or {}
        lines.append("  ".join([*(_fmt(r["args"][n]) for n in entry.arg_names), r["status"],
                                *(_fmt(m.get(f)) for f in entry.metric_family)]))
    if len(body["results"]) > 50:
        lines.append(f"... {len(body['results']) - 50} more (use --json)")
    return "\n".join(lines)


def positive_finite(text: str) -> float:
    """An argparse type: a positive, finite number (NaN and infinities are not a duration or a rate)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive, finite number")
    return value


def _repair(args) -> int:
    from pw.cli.common import first_line_intact
    from pw.kernel_profile.cache import Cache

    cache = Cache(args.db)
    path = cache.ledger.path
    if not path.is_file():
        raise InputError(f"--db {cache.db}: no cache ledger at {path}; nothing to repair")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file, expected a kernel-profile cache ledger; nothing repaired")
    if not first_line_intact(path):
        raise InputError(f"{path}: not a ProfileWeaver ledger (first line is not a valid event); nothing repaired")
    body = cache.repair()
    if args.json:
        print_json(body)
    elif not body["repaired"]:
        print_text(f"{path}: intact, nothing to repair; {cache.db.name} holds {body['rows_after']} rows")
    else:
        ev = body["event"]
        print_text(f"quarantined {ev['length']} torn bytes at offset {ev['offset']} to {body['quarantine']}; "
                   f"recorded LedgerRepaired; rebuilt {cache.db.name}: {body['rows_after']} rows "
                   f"(was {body['rows_before']})")
    return 0


def _check_output_dir(out: Path) -> None:
    """Before measuring: the snapshot's directory is free and can be written (nothing created yet)."""
    from pw.kernel_profile import snapshot
    from pw.kernel_profile.cache import writable_dir

    snapshot.check_free(out)
    writable_dir(out, f"--output-dir {out}")


def kernel_profile(args) -> int:
    verb = args.kp_verb
    if verb is None:
        raise InputError("kernel-profile: expected a sub-verb: list, count-missing, query, run, measure or repair")
    if verb == "repair":
        return _repair(args)
    if verb == "list":
        return _list(args)
    entry, specs = _entry_and_specs(args)
    if verb == "measure":
        return _measure(args, entry, specs)
    from pw.kernel_profile.cache import Cache

    cache = Cache(args.db)
    if verb in ("count-missing", "query"):
        return _count_missing_or_query(args, verb, entry, specs, cache)
    return _run(args, entry, specs, cache)


def _list(args) -> int:
    from pw.kernel_profile import service

    entries = service.list_entries()
    if args.json:
        print_json({"entries": entries})
    else:
        for e in entries:
            print_text(f"{e['table']:<12} --backend {e['backend']:<6} {e['kernel_kind']:<8} "
                       f"args=({', '.join(a['name'] for a in e['args'])}) metrics=({', '.join(e['metric_family'])}) "
                       f"env={e['env']} gpus={e['gpu_count_fn'].split(':')[1]}")
    return 0


def _measure(args, entry, specs) -> int:
    from pw.kernel_profile.cache import writable_dir
    from pw.kernel_profile.measure import measure

    out = Path(args.output_dir or f"measure_{entry.table}_{entry.backend}")
    writable_dir(out, f"--output-dir {out}")
    body = measure(entry, specs, out, duration_s=args.duration_s, telemetry_hz=args.telemetry_hz,
                   settings=_settings(args))
    for w in body["warnings"]:
        sys.stderr.write(f"pw kernel-profile: warning: {w}\n")
    if args.json:
        print_json(body)
    else:
        s = body["summary"]
        print_text(f"measure {entry.table}/{entry.backend} -> {out}: {s['launches']} launches in "
                   f"{s['window_s']} s, median {s['stats']['median_ms']:.4g} ms, rel stdev "
                   f"{s['stats']['rel_stdev']:.3%}; files: {', '.join(body['files'])}")
    return 0


def _count_missing_or_query(args, verb: str, entry, specs, cache) -> int:
    from pw.kernel_profile import service

    gpu = service.resolve_gpu(args.gpu_name)
    if verb == "count-missing":
        body = service.count_missing(entry, specs, gpu, cache)
        if args.json:
            print_json(body)
        else:
            print_text(f"{body['missing_count']} of {body['spec_count']} missing "
                       f"({body['unverified_count']} unverified) for {entry.table}/{entry.backend} "
                       f"gpu_name={gpu.name} db={cache.db}")
        return 0
    body = service.query(entry, specs, gpu, cache)
    print_json(body) if args.json else print_text(_table_text(entry, body))
    return 0


def _run(args, entry, specs, cache) -> int:
    """Measure what the cache lacks (or everything: --force, --fresh); exit 1 while any is missing."""
    from pw.kernel_profile import service

    if args.force and args.fresh:
        raise InputError("--force and --fresh: give at most one (--fresh measures like --force and stores nothing)")
    out = Path(args.output_dir) if args.output_dir else None
    if out is not None:
        _check_output_dir(out)
    remote = chosen_remote(args)
    if remote.kind == "slurm":
        return _run_remote(args, entry, specs, cache, remote, out)
    started = time.time()
    body = service.run(entry, specs, args.gpu_name, cache, force=args.force, fresh=args.fresh,
                       settings=_settings(args))
    for w in body["warnings"]:
        sys.stderr.write(f"pw kernel-profile: warning: {w}\n")
    code = 1 if body["missing_count"] else 0
    if out is not None:
        _write_snapshot(args, out, entry, specs, cache, body, started, code)
    print_json(body) if args.json else print_text(
        _table_text(entry, body) + f"\nmode={body['mode']} measured={body['measured_count']} "
        f"failed={body['failed_count']} persisted={body['persisted']}")
    return code


def _run_remote(args, entry, specs, cache, remote, out: Path | None) -> int:
    """`run --remote NAME` on Slurm: the job's files go to --output-dir, which the nodes must share."""
    from pw.cli.common import self_command
    from pw.remote import kernel_fill

    if args.db:
        raise InputError(f"--db with --remote {remote.name}: refused; the job merges into this checkout's cache "
                         "($PW_PROFILE_DB or ~/.cache/profileweaver/kernel-profile/profile.db)")
    if out is None:
        raise InputError(f"--remote {remote.name}: --output-dir DIR is required (the job's files and the tasks' "
                         "private databases go there; the cluster's nodes must see it)")
    body = kernel_fill.fill(entry, specs, args.gpu_name, cache, remote, out.resolve(), self_command(),
                            force=args.force, fresh=args.fresh)
    r = body["remote"]
    print_json(body) if args.json else print_text(
        _table_text(entry, body) + f"\nmode={body['mode']} measured={body['measured_count']} "
        f"failed={body['failed_count']} persisted={body['persisted']} remote={remote.name} "
        f"job={r['job_id'] or '-'} nodes={','.join(r['nodes']) or '-'} ({out}/remote-run.json)")
    return 1 if body["missing_count"] else 0


def _write_snapshot(args, out: Path, entry, specs, cache, body: dict, started: float, code: int) -> None:
    """--output-dir: the request, the results, the curve and the job's facts, as files."""
    from pw.kernel_profile import snapshot
    from pw.kernel_profile.specs import as_dict

    snapshot.check_free(out)
    body["output_dir"] = str(out)
    stored = "the rows are stored in the cache; " if body["persisted"] else ""
    body["snapshot"] = snapshot.write(out, stored, {
        "request.json": {"verb": "run", "table": entry.table, "backend": entry.backend, "mode": body["mode"],
                         "gpu_name": args.gpu_name, "db": str(cache.db), "specs": [as_dict(s) for s in specs]},
        "results.json": body,
        "curve.json": {"table": entry.table, "backend": entry.backend, "gpu_name": body["gpu_name"],
                       **snapshot.curve(entry.arg_names, entry.metric_family, body["results"])},
        "job.meta.json": {"started_at": started, "finished_at": time.time(), "exit_code": code,
                          "argv": sys.argv[1:], "devices": body["devices"], "pinned": body["devices_pinned"],
                          "worker_slots": body["worker_slots"], "measure_wall_s": body["measure_wall_s"],
                          "python": sys.version.split()[0], "profiler_revision": entry.profiler_revision},
    })


def add_parser(sub, verb_factory) -> None:
    """The `kernel-profile` verb and its six sub-verbs."""
    p = verb_factory(sub, "kernel-profile",
                     "the kernel-profile cache: list, count-missing, query, run, measure, repair", run=False)
    kp = p.add_subparsers(dest="kp_verb", metavar="SUBVERB", parser_class=type(p))

    def common(q, *, multi: bool = True):
        q.add_argument("table", metavar="TABLE")
        q.add_argument("--backend", metavar="BACKEND", help="the table's backend (never inside a spec)")
        q.add_argument("--spec", action="append", metavar="JSON", help="one spec as a JSON object; repeatable")
        if multi:
            q.add_argument("--specs", metavar="PATH",
                           help='a JSON object, a JSON list, {"specs": [...]} or JSON lines')
        q.add_argument("--gpu-name", metavar="NAME", help="the database GPU key (a key and filter, not a device selector)")
        q.add_argument("--db", metavar="PATH", help="a task-scoped profile.db (default: $PW_PROFILE_DB or "
                       "~/.cache/profileweaver/kernel-profile/profile.db)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")

    q = kp.add_parser("list", help="each table/backend with its kind, args, metrics, env and GPU count")
    q.add_argument("--json", action="store_true", help="print the result as JSON")
    common(kp.add_parser("count-missing", help="how many specs have no verified row (read-only)"))
    common(kp.add_parser("query", help="one result per spec, missing rows included (read-only)"))
    q = kp.add_parser("run", help="fill missing rows by measuring on idle GPUs, then query")
    common(q)
    g = q.add_mutually_exclusive_group()
    g.add_argument("--force", action="store_true", help="re-measure every spec and store the rows")
    g.add_argument("--fresh", action="store_true", help="measure every spec and store nothing")
    q.add_argument("--output-dir", metavar="DIR", help="write request/results/curve/job.meta snapshot here "
                   "(with --remote: the job's files, on a filesystem the nodes share)")
    add_remote_args(q, "the fill")
    q = kp.add_parser("measure", help="cache-free CUPTI + NVML telemetry window for one spec")
    common(q, multi=False)
    q.set_defaults(specs=None)
    q.add_argument("--output-dir", metavar="DIR", help="default ./measure_<table>_<backend>")
    q.add_argument("--duration-s", type=positive_finite, default=10.0, metavar="S", help="window length (default 10)")
    q.add_argument("--telemetry-hz", type=positive_finite, default=20.0, metavar="HZ",
                   help="NVML sampling (default 20)")
    q.add_argument("--no-clear-l2", action="store_true", help="warm back-to-back launches instead of cold L2")
    q.add_argument("--cuda-graph", action="store_true", help="replay the invocation from a CUDA graph")
    q = kp.add_parser("repair", help="quarantine a torn tail of the cache ledger, then rebuild profile.db")
    q.add_argument("--db", metavar="PATH", help="the profile.db whose ledger to repair (default: $PW_PROFILE_DB or "
                   "~/.cache/profileweaver/kernel-profile/profile.db)")
    q.add_argument("--json", action="store_true", help="print the result as JSON")
