"""Measure the ledger: fsync'd appends, batched appends, replay + verify, and `pw --help` start-up.

    .venv/bin/python benchmarks/ledger.py [--events 100000] [--dir DIR]

Events are a mix like a real run (timings with 10-20 samples, builds with steps, routing choices,
profile captures with artifact hashes, notes), written to a temporary directory. The table ends
with `key=value` lines that scripts can grep. `fsync_floor_per_s` is the same directory's raw
write+fsync rate: the ceiling for any durable single append on this disk.

Beside the targets it prints why they are or are not met: each part of the replay, the rates in
MB/s, this machine's floors (msgspec encode, sha256, one typed decode of the same lines with
nothing of ours around it), and the same append and replay on small one-field events.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402

from ledger import events as ev  # noqa: E402
from ledger.contract import Contract, Source, Step  # noqa: E402
from ledger.store import Ledger  # noqa: E402
from projections import state  # noqa: E402

TARGETS = {
    "append_fsync_events_per_s": (1_000, ">="),
    "append_batched_events_per_s": (100_000, ">="),
    "replay_verify_events_per_s": (200_000, ">="),
    "cli_help_ms": (300, "<="),
}


def _sha(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(16)).hexdigest()


def run_started() -> ev.RunStarted:
    contract = Contract(
        version=1, name="bench", source=Source(editable=["src/*.c"]), run=Step(argv=["./bench", "--n", "512"])
    )
    return ev.RunStarted(
        run_id="20260101-000000-bench",
        workload="workloads/bench",
        contract=contract,
        manifest_sha256=None,
        inferred=False,
        inference=[],
        source_sha256="0" * 64,
        budgets=ev.Budgets(iterations=10, repairs=7),
        host=ev.Host(hostname="bench", platform="linux", machine="x86_64", cpus=2, python="3.11"),
    )


def realistic_payloads(n: int, seed: int = 0) -> list[ev.Payload]:
    """`n` payloads in a run-like mix; the first is RunStarted."""
    rng = random.Random(seed)
    out: list[ev.Payload] = [run_started()]
    while len(out) < n:
        r = rng.random()
        target = f"c{rng.randrange(50)}"
        if r < 0.35:
            k = rng.randint(10, 20)
            base = rng.uniform(0.5, 2.0)
            out.append(
                ev.TimingRecorded(
                    purpose="screening",
                    targets=["baseline", target],
                    metric="wall",
                    unit="s",
                    samples={
                        "baseline": [base * rng.gauss(1, 0.02) for _ in range(k)],
                        target: [base * rng.gauss(0.9, 0.02) for _ in range(k)],
                    },
                    order=[rng.choice(("AB", "BA")) for _ in range(k)],
                    seed=rng.randrange(1 << 31),
                    exploratory=False,
                    conditions=ev.TimingConditions(host="bench", argv=["./bench", "--n", "512"], metric="wall",
                                                   tool_versions={"perf": "6.1"}),
                )
            )
        elif r < 0.55:
            steps = [
                ev.StepOutcome(
                    argv=["cc", "-O2", "-c", f"src/k{i}.c"],
                    exit_code=0,
                    signal=None,
                    duration_s=rng.uniform(0.1, 3),
                    timed_out=False,
                    log_sha256=_sha(rng),
                )
                for i in range(rng.randint(1, 3))
            ]
            out.append(
                ev.BuildFinished(
                    target=target,
                    inputs_sha256=_sha(rng),
                    outcome="ok",
                    steps=steps,
                    duration_s=sum(s.duration_s for s in steps),
                    binary_sha256=_sha(rng),
                )
            )
        elif r < 0.65:
            out.append(
                ev.RoutingDecided(
                    phase=rng.choice(("discovery", "diagnosis")),
                    chosen="perf",
                    reason="cheapest adapter with function granularity",
                    rejected=[ev.Rejection("ncu", "no NVIDIA GPU"), ev.Rejection("callgrind", "50x overhead")],
                )
            )
        elif r < 0.8:
            out.append(
                ev.ProfileCaptured(
                    adapter="perf",
                    target=target,
                    artifacts={"perf.data": _sha(rng), "perf.script": _sha(rng)},
                    wall_s=rng.uniform(1, 10),
                    tool_version="6.1",
                    command=["perf", "record", "-g", "--", "./bench"],
                    can_reprofile=True,
                )
            )
        else:
            out.append(ev.Note(text=f"candidate {target}: unrolled the inner loop ×4 — {rng.random():.6f}"))
    return out[:n]


def bench_fsync_appends(path: Path, payloads: list[ev.Payload]) -> float:
    ledger = Ledger(path)
    seq = ledger.head().seq if path.exists() else 0
    t0 = time.perf_counter()
    for p in payloads:
        seq = ledger.append(p, expected_seq=seq)[-1].seq
    return len(payloads) / (time.perf_counter() - t0)


def bench_batched_appends(path: Path, payloads: list[ev.Payload], batch: int = 1000) -> float:
    ledger = Ledger(path)
    seq = 0
    t0 = time.perf_counter()
    for i in range(0, len(payloads), batch):
        seq = ledger.append(payloads[i : i + batch], expected_seq=seq)[-1].seq
    return len(payloads) / (time.perf_counter() - t0)


def bench_replay_verify(path: Path, repeats: int = 3) -> tuple[float, dict[str, float]]:
    """Best of `repeats`: what `pw replay` does on a ledger nobody has read yet: verify every
    line's hash and the chain, decode every event typed (one parse per line), fold them into the
    run state. Also returns each part's own rate, so a miss can be pinned on the part causing it."""
    names = {"verify_only": "part_verify_only_events_per_s", "read": "part_verify_and_typed_read_events_per_s",
             "fold": "part_fold_events_per_s"}
    best, parts = 0.0, dict.fromkeys(names.values(), 0.0)
    for _ in range(repeats):
        t0 = time.perf_counter()
        events = Ledger(path).events()  # a fresh object: nothing verified or cached before
        gc.freeze()  # as `pw` does after reading a ledger (pw/cli/common.py checked_events)
        t1 = time.perf_counter()
        run_state = state.fold(events)
        t2 = time.perf_counter()
        verified = Ledger(path).verify()
        t3 = time.perf_counter()
        if not verified.ok or run_state.head.seq != verified.events or len(events) != verified.events:
            raise SystemExit(f"benchmark ledger failed verification: {verified.message}")
        n = verified.events
        best = max(best, n / (t2 - t0))
        for part, dt in (("read", t1 - t0), ("fold", t2 - t1), ("verify_only", t3 - t2)):
            parts[names[part]] = max(parts[names[part]], n / dt)
        del events, run_state
        gc.unfreeze()
    return best, parts


def bench_small_events(workdir: Path, n: int) -> dict[str, float]:
    """The same batched append and replay on `n` one-field Notes (about 300 bytes a line).

    Not a target: a diagnostic. The realistic mix is bounded by msgspec's typed decode of its
    payloads (floats and lists); on small events the same code shows its own per-event overhead.
    """
    path = workdir / "small.jsonl"
    payloads: list[ev.Payload] = [run_started()] + [ev.Note(text=f"note {i}") for i in range(n - 1)]
    append = bench_batched_appends(path, payloads)
    del payloads
    replay, _ = bench_replay_verify(path)
    return {
        "small_bytes_per_event": path.stat().st_size / n,
        "small_append_batched_events_per_s": append,
        "small_replay_verify_events_per_s": replay,
    }


def machine_floors(path: Path, payloads: list[ev.Payload]) -> dict[str, float]:
    """The bare per-event costs of this machine, with nothing of the ledger around them: msgspec
    encoding of the envelope, sha256 of each line, and one typed msgspec decode of the whole file.
    Replay + verify needs at least a hash and a typed decode per event, batched append an encode
    and a hash (plus the read-back decode), so these bound what the ledger can reach here."""
    from ledger import codec
    from ledger.events import Envelope

    lines = path.read_bytes().split(b"\n")[:-1]
    envs = [Envelope(seq=i, id="0" * 32, type=p.TYPE, v=p.VERSION, at="t", actor="cli", cause=None, key=None,
                     batch=0, data=p, prev="0" * 64) for i, p in enumerate(payloads)]
    encoder = msgspec.json.Encoder()
    out = {}
    gc.disable()
    try:
        t = time.perf_counter()
        for e in envs:
            encoder.encode(e)
        out["floor_encode_events_per_s"] = len(envs) / (time.perf_counter() - t)
        t = time.perf_counter()
        for line in lines:
            hashlib.sha256(line).digest()
        out["floor_sha256_events_per_s"] = len(lines) / (time.perf_counter() - t)
        decoder, _ = codec._block_decoder()
        blob = b"\n".join(lines) + b"\n"
        t = time.perf_counter()
        decoder.decode_lines(blob)
        out["floor_typed_decode_events_per_s"] = len(lines) / (time.perf_counter() - t)
    finally:
        gc.enable()
    return out


def fsync_floor(directory: Path, n: int = 300) -> float:
    path = directory / "fsync-floor"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, b"x" * 400 + b"\n")
            os.fsync(fd)
        return n / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()


def cli_help_ms(runs: int = 10) -> float:
    exe = shutil.which("pw", path=str(Path(sys.executable).parent)) or shutil.which("pw")
    if exe is None:
        raise SystemExit("pw console script not found (pip install -e . first)")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events for batched append and replay")
    parser.add_argument("--fsync-events", type=int, default=3000, help="cap on fsync'd single appends")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--help-runs", type=int, default=10)
    args = parser.parse_args(argv)

    payloads = realistic_payloads(args.events)
    workdir = Path(tempfile.mkdtemp(prefix="pw-bench-", dir=args.dir))
    try:
        results: dict[str, float] = {}
        floor = fsync_floor(workdir)
        n_fsync = min(args.events, args.fsync_events)
        results["append_fsync_events_per_s"] = bench_fsync_appends(workdir / "single.jsonl", payloads[:n_fsync])
        batched = workdir / "batched.jsonl"
        results["append_batched_events_per_s"] = bench_batched_appends(batched, payloads)
        size_mb = batched.stat().st_size / 1e6
        floors = machine_floors(batched, payloads[: min(len(payloads), 50_000)])
        # The inputs are scaffolding: a reader would not hold them, and a large live heap taxes
        # every garbage collection that the replay triggers.
        del payloads
        gc.collect()
        results["replay_verify_events_per_s"], parts = bench_replay_verify(batched)
        results["cli_help_ms"] = cli_help_ms(args.help_runs)
        bytes_per_event = size_mb * 1e6 / args.events
        parts["append_batched_mb_per_s"] = results["append_batched_events_per_s"] * bytes_per_event / 1e6
        parts["replay_verify_mb_per_s"] = results["replay_verify_events_per_s"] * bytes_per_event / 1e6
        parts["replay_verify_over_typed_decode_floor"] = (
            results["replay_verify_events_per_s"] / floors["floor_typed_decode_events_per_s"]
        )
        parts.update(bench_small_events(workdir, args.events))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    from rich.console import Console
    from rich.table import Table

    load = os.getloadavg()[0]
    table = Table(
        title=f"ledger benchmark: {args.events} events ({size_mb:.1f} MB), {n_fsync} fsync'd appends, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}",
    )
    for col in ("measure", "value", "target", "met"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    for key, value in results.items():
        target, op = TARGETS[key]
        met = value >= target if op == ">=" else value <= target
        table.add_row(key, f"{value:,.1f}", f"{op} {target:,}", "yes" if met else "NO")
    table.add_row("fsync_floor_per_s (raw write+fsync)", f"{floor:,.1f}", "", "")
    for key, value in parts.items():
        table.add_row(f"  {key}", f"{value:,.2f}" if value < 10 else f"{value:,.1f}", "", "")
    for key, value in floors.items():
        table.add_row(f"  machine floor: {key}", f"{value:,.1f}", "", "")
    Console().print(table)
    print(f"fsync_floor_per_s={floor:.1f}")
    for key, value in parts.items():
        print(f"{key}={value:.2f}" if value < 10 else f"{key}={value:.1f}")
    for key, value in floors.items():
        print(f"{key}={value:.1f}")
    for key, value in results.items():
        print(f"{key}={value:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
