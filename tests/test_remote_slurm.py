"""Kernel-profile fills on a real Slurm (`.ci/slurm up`: munge, slurmctld, two slurmd on this host;
`.ci/test` starts it and exports SLURM_CONF). The FAKE runner of tests/kernel_profile_fake.py runs
in the real worker on the nodes, through the same `pw kernel-profile run` a user's job runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from ledger import events as ev

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _cluster_or_skip() -> str:
    # .ci/test started one (PW_REQUIRE_SLURM=1): then a missing cluster is a failure, not a skip.
    stop = pytest.fail if os.environ.get("PW_REQUIRE_SLURM") == "1" else pytest.skip
    conf = os.environ.get("SLURM_CONF", "")
    if not conf or not Path(conf).is_file():
        stop("no local Slurm: run `.ci/slurm up DIR` and export SLURM_CONF (.ci/test does)")
    try:
        up = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        stop(f"Slurm at SLURM_CONF={conf} does not answer: {exc}")
    if up.returncode != 0:
        stop(f"Slurm at SLURM_CONF={conf} does not answer: {up.stderr.strip()}")
    return conf


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    _cluster_or_skip()
    cfg = tmp_path / "remote.yaml"
    cfg.write_text("remotes:\n"
                   "  two:\n    kind: slurm\n    partition: pw\n    tasks: 2\n    gpus_per_task: 0\n"
                   "    poll_s: 0.2\n    time: '00:10:00'\n    env: {PW_PROFILE_GPUS: '0'}\n")
    monkeypatch.setenv("PW_PROFILE_DB", str(tmp_path / "cache" / "profile.db"))
    monkeypatch.setenv("PW_FAKE_RUN_LOG", str(tmp_path / "measured.log"))
    monkeypatch.delenv("PW_FAKE_GATE", raising=False)
    monkeypatch.delenv("PW_PROFILE_GPUS", raising=False)
    return tmp_path


def specs_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"specs{n}.jsonl"
    path.write_text("".join(json.dumps({"rows": r, "cols": 8, "dtype": "bf16"}) + "\n" for r in range(1, n + 1)))
    return path


def kp(tmp_path: Path, *argv: str, env: dict | None = None, wait: bool = True):
    cmd = [sys.executable, "-m", "tests.kernel_profile_fake", "kernel-profile", *argv]
    if argv[0] == "run" and "--remote" in argv:
        cmd += ["--remote-config", str(tmp_path / "remote.yaml")]
    full_env = {**os.environ, **(env or {})}
    if not wait:
        return subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300)


def fill(tmp_path: Path, specs: Path, out: str, **kw):
    return kp(tmp_path, "run", "fake_matrix", "--backend", "fake", "--specs", str(specs), "--gpu-name", "FAKE",
              "--remote", "two", "--output-dir", str(tmp_path / out), "--json", **kw)


def missing(tmp_path: Path, specs: Path) -> int:
    r = kp(tmp_path, "count-missing", "fake_matrix", "--backend", "fake", "--specs", str(specs), "--gpu-name",
           "FAKE", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["missing_count"]


def measured(tmp_path: Path) -> list[str]:
    log = tmp_path / "measured.log"
    return log.read_text().split() if log.exists() else []


def rows(tmp_path: Path) -> list[tuple]:
    with sqlite3.connect(tmp_path / "cache" / "profile.db") as con:
        return con.execute("SELECT rows, provenance FROM fake_matrix ORDER BY rows").fetchall()


def wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@contextmanager
def held_at_the_gate(cluster: Path, specs: Path):
    """A fill whose two tasks have started and wait at the fake runner's gate until the block ends;
    then the gate opens and the fill runs to its end (`job.returncode`, `job.out`, `job.err`)."""
    gate = cluster / "gate"
    job = fill(cluster, specs, "out", env={"PW_FAKE_GATE": str(gate)}, wait=False)
    try:
        for t in (0, 1):
            wait_for(cluster / "out" / f"task-{t}" / "started.json")
        yield job
    finally:
        gate.touch()
        job.out, job.err = job.communicate(timeout=300)


def test_a_40_spec_fill_spreads_over_two_nodes_and_merges_into_the_callers_cache(cluster):
    specs = specs_file(cluster, 40)
    assert missing(cluster, specs) == 40
    r = fill(cluster, specs, "out")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["missing_count"] == 0 and body["measured_count"] == 40 and body["persisted"]
    run = json.loads((cluster / "out" / "remote-run.json").read_text())
    assert run["job_id"] == body["remote"]["job_id"] and run["partition"] == "pw"
    assert run["nodes"] == ["n1", "n2"], run["tasks"]
    assert [t["answered"] for t in run["tasks"]] == [20, 20] and {t["state"] for t in run["tasks"]} == {"COMPLETED"}
    assert missing(cluster, specs) == 0
    got = rows(cluster)
    assert len(got) == 40
    where = {json.loads(p)["slurm_node"] for _, p in got}
    assert where == {"n1", "n2"}
    report = json.loads((cluster / "out" / "merge-report.json").read_text())
    assert report["merged"] and report["conflicts"] == [] and report["events"] == 40
    # Each task measured into its own ledger; the caller's ledger got them in one append.
    for t in (0, 1):
        assert (cluster / "out" / f"task-{t}" / "profile.ledger.jsonl").is_file()
    assert len(measured(cluster)) == 40
    again = fill(cluster, specs, "out2")
    assert again.returncode == 0 and json.loads(again.stdout)["measured_count"] == 0
    assert not (cluster / "out2" / "job.sh").exists()  # nothing missing: nothing submitted
    assert len(measured(cluster)) == 40


def test_fresh_on_slurm_measures_and_merges_nothing(cluster):
    specs = specs_file(cluster, 4)
    r = kp(cluster, "run", "fake_matrix", "--backend", "fake", "--specs", str(specs), "--gpu-name", "FAKE",
        "--remote", "two", "--output-dir", str(cluster / "out"), "--fresh", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["mode"] == "fresh" and not body["persisted"] and body["missing_count"] == 0
    assert {x["source"] for x in body["results"]} == {"fresh"} and len(measured(cluster)) == 4
    assert not (cluster / "out" / "merge-report.json").exists()
    assert not (cluster / "cache" / "profile.ledger.jsonl").exists() and missing(cluster, specs) == 4


def test_remote_refuses_db_a_missing_output_dir_and_an_unknown_remote(cluster):
    specs = specs_file(cluster, 2)
    base = ["run", "fake_matrix", "--backend", "fake", "--specs", str(specs), "--gpu-name", "FAKE"]
    r = kp(cluster, *base, "--remote", "two", "--output-dir", str(cluster / "o"), "--db", str(cluster / "x.db"))
    assert r.returncode == 2 and "--db with --remote two: refused" in r.stderr and "Traceback" not in r.stderr
    r = kp(cluster, *base, "--remote", "two")
    assert r.returncode == 2 and "--output-dir DIR is required" in r.stderr
    r = kp(cluster, *base, "--remote", "nowhere", "--output-dir", str(cluster / "o"))
    assert r.returncode == 2 and "--remote nowhere: not a configured remote (remotes in" in r.stderr and "two" in r.stderr
    r = kp(cluster, *base, "--remote", "two", "--remote-set", "colour=blue", "--output-dir", str(cluster / "o"))
    assert r.returncode == 2 and "unknown field 'colour'" in r.stderr
    r = kp(cluster, *base, "--remote", "two", "--remote-set", "partition=nope", "--output-dir", str(cluster / "o"))
    assert r.returncode == 3 and "--remote two: Slurm refused the job" in r.stderr and "Invalid partition" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (cluster / "o").exists() and not (cluster / "cache" / "profile.ledger.jsonl").exists()


def test_a_row_stored_while_the_job_ran_is_a_conflict_that_merges_nothing(cluster):
    specs = specs_file(cluster, 4)
    with held_at_the_gate(cluster, specs) as job:
        # Another writer fills spec 1 here while the job's tasks wait at the gate.
        local = kp(cluster, "run", "fake_matrix", "--backend", "fake", "--spec",
                   json.dumps({"rows": 1, "cols": 8, "dtype": "bf16"}), "--gpu-name", "FAKE",
                   env={"PW_PROFILE_GPUS": "0"})
        assert local.returncode == 0, local.stderr
    err = job.err
    assert job.returncode == 4, err
    assert "nothing merged" in err and "merge-report.json" in err and "Traceback" not in err
    report = json.loads((cluster / "out" / "merge-report.json").read_text())
    assert not report["merged"] and [c["args"]["rows"] for c in report["conflicts"]] == [1]
    assert [r[0] for r in rows(cluster)] == [1]  # only the other writer's row
    assert missing(cluster, specs) == 3
    retry = fill(cluster, specs, "retry")
    assert retry.returncode == 0, retry.stderr
    assert json.loads(retry.stdout)["measured_count"] == 3 and missing(cluster, specs) == 0


def test_a_cancelled_task_fails_its_specs_not_the_batch_and_a_retry_fills_only_them(cluster):
    specs = specs_file(cluster, 6)
    with held_at_the_gate(cluster, specs) as job:
        plan = json.loads((cluster / "out" / "plan.json").read_text())
        job_id = json.loads((cluster / "out" / "remote-run.json").read_text())["job_id"]
        subprocess.run(["scancel", f"{job_id}_1"], check=True, timeout=30)
    out, err = job.out, job.err
    assert job.returncode == 1, err  # rows are missing: the batch itself merged
    body = json.loads(out)
    cancelled = sorted(a["rows"] for a in plan["chunks"][1])
    lost = sorted(r["args"]["rows"] for r in body["results"] if r["status"] != "ok")
    assert lost == cancelled and len(cancelled) == 3
    why = {r["error"] for r in body["results"] if r["status"] != "ok"}
    assert why == {"task_died"}
    assert all("CANCELLED" in r["message"] for r in body["results"] if r["status"] != "ok")
    assert missing(cluster, specs) == 3
    before = len(measured(cluster))
    retry = fill(cluster, specs, "retry")
    assert retry.returncode == 0, retry.stderr
    again = measured(cluster)[before:]
    assert sorted(int(line.split(",")[0]) for line in again) == cancelled
    assert missing(cluster, specs) == 0


def pw_cli(*argv: object, cwd: Path) -> subprocess.CompletedProcess:
    """`pw ...` as its own process (a node runs this same command again, without --remote)."""
    return subprocess.run([sys.executable, "-m", "pw.cli", *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_a_campaign_runs_on_an_allocated_node_and_a_confirmation_on_another_beside_it(cluster, matmul_template):
    from tests.conftest import WORKLOADS, apply_patch, copy_run, ledger_events

    run = copy_run(matmul_template, cluster)
    assert pw_cli("prepare", run, "--candidate", "lo:baseline:loop interchange i-k-j", cwd=cluster).returncode == 0
    apply_patch(run / "candidates" / "lo" / "src", WORKLOADS / "matmul-c" / "candidates" / "interchange.patch")
    cfg = ["--remote", "two", "--remote-config", cluster / "remote.yaml"]
    r = pw_cli("evaluate", run, "lo", "--json", "--max-pairs", 6, *cfg, "--remote-set", "options=[--nodelist=n1]", cwd=cluster)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "Slurm job" in r.stderr
    screened = json.loads(r.stdout)  # the node's own output, relayed
    assert screened["id"] == "lo" and screened["status"] in ("verified", "proposed", "inconclusive"), screened
    reproducible = next(g for g in screened["gates"] if g["name"] == "reproducible")
    assert "timed on n1 (host " in reproducible["detail"] and "exclusive" in reproducible["detail"]
    c = pw_cli("confirm", run, "lo", "--fresh", "--json", *cfg, "--remote-set", "options=[--nodelist=n2]",
               cwd=cluster)
    assert c.returncode in (0, 1), c.stderr
    timed = [(e.data.purpose, e.data.conditions.node.node if e.data.conditions.node else None)
             for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded)]
    assert timed[0] == ("baseline-variance", None)  # `pw start`, here
    assert ("screening", "n1") in timed and ("confirmation", "n2") in timed, timed
    for label, node in (("evaluate-lo-1", "n1"), ("confirm-lo-1", "n2")):
        facts = json.loads((run / "remote" / label / "remote-run.json").read_text())
        assert facts["node"] == node and facts["exit_code"] in (0, 1) and "--exclusive" in facts["sbatch"]
    assert pw_cli("report", run, cwd=cluster).returncode == 0
    rows = json.loads((run / "report.json").read_text())["reproducibility"]["timed_elsewhere"]
    assert [(x["purpose"], x["node"]) for x in rows] == [("screening", "n1"), ("confirmation", "n2")]
    assert all(x["speedup"] and x["interval"] for x in rows), rows
    assert "### Where the campaigns ran" in (run / "report.md").read_text()
    audit = pw_cli("audit", run, cwd=cluster)
    assert audit.returncode == 0, audit.stdout + audit.stderr
