"""The evidence is out of the agent's reach (issue 26): anchors, re-hashed sources and evidence.

The run is the recorded pyloop run of tests/data/run-gates-v1-pyloop (a ledger and its raw
evidence; its baseline copy and candidate workspace are restored from the evidence it cites), so
no workload runs here. The forger is a script with the agent's own permissions: it can write
the run directory, import pw's pure judge, re-seal the hash chain and rebuild the projections.
docs/trust-model.md says what each defence holds against.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest

from ledger import anchor
from ledger import events as ev
from ledger.evidence import EvidenceStore
from ledger.store import Ledger
from tests.conftest import ledger_events, pw_main, python_as

RECORDED = Path(__file__).parent / "data" / "run-gates-v1-pyloop"
CID = "dict"


def _restore(run: Path, rel: str, manifest_sha: str, patch_sha: str | None = None) -> None:
    """A source tree the run's evidence describes: its manifest's files, then its patch."""
    store = EvidenceStore(run / "raw")
    for name, sha in msgspec.json.decode(store.get(manifest_sha)).items():
        (run / rel / name).parent.mkdir(parents=True, exist_ok=True)
        (run / rel / name).write_bytes(store.get(sha))
    if patch_sha is not None:
        subprocess.run(["patch", "-p1", "-s", "-d", str(run / rel)], input=store.get(patch_sha), check=True,
                       timeout=30)


@pytest.fixture
def run(tmp_path) -> Path:
    """The recorded run, whole: projections rebuilt, baseline/ and the candidate's workspace as judged."""
    if not shutil.which("patch"):
        pytest.skip("patch is not installed")
    run = tmp_path / "runs" / "20260101-000000-pyloop"
    shutil.copytree(RECORDED, run)
    events = ledger_events(run)
    prepared = next(e.data for e in events if isinstance(e.data, ev.CandidatePrepared) and e.data.id == CID)
    diff = next(e.data for e in events if isinstance(e.data, ev.CandidateDiffRecorded) and e.data.id == CID)
    _restore(run, "baseline", prepared.parent_manifest_sha256)
    _restore(run, prepared.workspace, prepared.parent_manifest_sha256, diff.patch_sha256)
    assert pw_main("rebuild", run).code == 0
    return run


def _printed_anchor(result) -> tuple[int, str]:
    line = next(x for x in result.err.splitlines() if " anchor " in x)
    return anchor.parse(line.split(" anchor ", 1)[1].split()[0])


# --- the forger -------------------------------------------------------------------------------------

def _about(data, cid: str) -> bool:
    return getattr(data, "id", None) == cid or getattr(data, "target", None) == cid \
        or cid in (getattr(data, "targets", None) or [])


def forge(run: Path, how: str) -> None:
    """Rewrite the run as a dishonest agent's script can: ``faster`` makes the candidate's timed
    samples 20% faster and re-judges it with pw's own pure judge; ``drop`` deletes every event of
    the candidate and renumbers the rest. Then the chain is re-sealed (every hash recomputed) and
    the projections rebuilt: the chain check and every recomputing check of `pw audit` pass."""
    from pw.app.judging import judge_recorded

    events = ledger_events(run)
    evidence = EvidenceStore(run / "raw")
    (run / "ledger.jsonl").unlink()
    forged = Ledger(run / "ledger.jsonl")
    seq = 0
    for env in events:
        data = env.data
        if how == "drop" and _about(data, CID):
            continue
        if how == "faster" and isinstance(data, ev.TimingRecorded) and CID in data.targets:
            samples = dict(data.samples)
            for key in (CID, f"{CID}:wall_s"):
                samples[key] = [round(x * 0.8, 9) for x in samples[key]]
            data = msgspec.structs.replace(data, samples=samples)
        if how == "faster" and isinstance(data, (ev.CandidateEvaluated, ev.GatesEvaluated)) and data.id == CID:
            continue  # judged again below, from the edited samples
        if how == "faster" and isinstance(data, ev.VerdictReached) and data.id == CID:
            rules = next(e.data.rules for e in events if isinstance(e.data, ev.GatesEvaluated) and e.data.id == CID)
            j = judge_recorded(forged.events(), CID, evidence, rules)
            if j.profile_diff is not None:
                evidence.put(j.profile_diff)  # as pw.app.judging.judge_candidate keeps it
            seq = forged.append([j.evaluated, j.gates, j.verdict], expected_seq=seq, actor=env.actor)[-1].seq
            continue
        seq = forged.append(data, expected_seq=seq, actor=env.actor, cause=env.cause)[-1].seq
    assert pw_main("rebuild", run).code == 0


@pytest.mark.parametrize("how", ["faster", "drop"])
def test_a_forger_that_rejudges_reseals_and_rebuilds_is_named_by_the_anchor(run, how, monkeypatch, tmp_path):
    last = pw_main("prepare", run, "--candidate", "z:baseline:another try")  # the last honest command
    assert last.code == 0, last
    printed = _printed_anchor(last)
    assert [(a.seq, a.hash) for a in anchor.anchors_for(run / "ledger.jsonl")][-1] == printed
    before = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached))
    forge(run, how)
    after = [e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached)]
    if how == "faster":
        assert after[0].speedup > before.speedup * 1.2, (before.speedup, after[0].speedup)  # a better headline
    else:
        assert after == []
    audit = pw_main("audit", run, "--json")
    assert audit.code == 1, audit
    report = audit.json()
    failed = [c["name"] for c in report["checks"] if not c["ok"]]
    assert failed == ["anchor"], report["checks"]  # everything it recomputes still follows
    said = {"faster": (f"anchor: event seq {printed[0]} hashes to ", "the history was rewritten since"),
            "drop": ("anchor: the ledger ends at seq ", f"but seq {printed[0]} was anchored")}[how]
    assert report["first_divergence"].startswith(said[0]) and said[1] in report["first_divergence"], report
    # A forger that also empties the anchor log: the head pw printed still names it.
    monkeypatch.setenv(anchor.ENV, str(tmp_path / "emptied.jsonl"))
    again = pw_main("audit", run, "--anchor", f"{printed[0]}:{printed[1][:16]}")
    assert again.code == 1 and "given with --anchor" in again.out, again


def test_audit_fails_when_a_judged_candidates_source_is_replaced_after_its_verdict(run):
    """The proposed 2.18x candidate's workspace, reverted to the baseline's code: the run still
    claims the speedup for a source that no longer holds it."""
    ws = run / "candidates" / CID / "src"
    shutil.copyfile(run / "baseline" / "kernel.py", ws / "kernel.py")
    audit = pw_main("audit", run)
    assert audit.code == 1, audit
    assert f"audit failed: sources: candidate {CID}: candidates/{CID}/src no longer hashes to it" in audit.out
    assert "not what its proposed verdict judged" in audit.out


# --- cheap runs: a ledger of two events --------------------------------------------------------------

def test_audit_rehashes_every_raw_file_cited_or_not(run_dir):
    assert pw_main("rebuild", run_dir).code == 0
    planted = EvidenceStore(run_dir / "raw").put(b"evidence nobody cites yet\n")
    assert pw_main("audit", run_dir).code == 0
    (run_dir / "raw" / planted[:2] / planted).write_bytes(b"edited\n")
    audit = pw_main("audit", run_dir)
    assert audit.code == 1 and f"raw: raw/{planted[:2]}/{planted}: its bytes no longer hash to its name" in audit.out


def test_audit_rehashes_the_baseline_copy(run_dir):
    assert pw_main("rebuild", run_dir).code == 0
    (run_dir / "baseline").mkdir()
    (run_dir / "baseline" / "main.c").write_text("int main(void) { return 0; }\n")
    audit = pw_main("audit", run_dir)
    assert audit.code == 1 and "sources: baseline/ no longer hashes to it" in audit.out, audit


@pytest.mark.parametrize("bad", ["7", "x:abcdefabcdef", "7:abc", "7:" + "g" * 64])
def test_a_printed_anchor_that_is_not_one_is_bad_input(run_dir, bad):
    r = pw_main("audit", run_dir, "--anchor", bad)
    assert r.code == 2 and r.err.count("\n") == 1 and "expected SEQ:HASH" in r.err, r


def test_a_printed_anchor_the_ledger_extends_passes_and_one_past_its_end_fails(run_dir):
    assert pw_main("rebuild", run_dir).code == 0
    head = Ledger(run_dir / "ledger.jsonl").head()
    assert pw_main("audit", run_dir, "--anchor", f"{head.seq}:{head.hash}").code == 0
    r = pw_main("audit", run_dir, "--anchor", f"{head.seq + 3}:{head.hash}")
    assert r.code == 1 and f"the ledger ends at seq {head.seq}, but seq {head.seq + 3} was anchored" in r.out


def test_each_command_that_appends_anchors_its_head_once_and_prints_it(run_dir, monkeypatch, tmp_path):
    log = tmp_path / "state" / "anchors.jsonl"
    monkeypatch.setenv(anchor.ENV, str(log))
    from pw.app.run import RunHandle

    handle = RunHandle(run_dir)
    anchor.begin()
    handle.ledger.append(ev.Note(text="one"), expected_seq=2)
    handle.ledger.append(ev.Note(text="two"), expected_seq=3)
    kept, why = anchor.flush("note")
    assert why is None and [(a.seq, a.command) for a in kept] == [(4, "note")]
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and msgspec.json.decode(lines[0])["hash"] == handle.ledger.head().hash
    with open(log, "ab") as f:
        f.write(b'{"v":1,"at":"torn')  # a torn last line names nothing, and hides nothing before it
    assert [a.seq for a in anchor.anchors_for(run_dir / "ledger.jsonl")] == [4]
    # Nothing appended: nothing anchored, nothing printed.
    quiet = pw_main("status", run_dir)
    assert " anchor " not in quiet.err and [a.seq for a in anchor.read(log)] == [4]
    # The next anchor starts a line of its own after the torn one.
    anchor.begin()
    handle.ledger.append(ev.Note(text="three"), expected_seq=4)
    anchor.flush("note")
    assert [a.seq for a in anchor.read(log)] == [4, 5]


def test_an_unwritable_anchor_log_never_fails_the_command(run_dir, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv(anchor.ENV, str(blocker / "anchors.jsonl"))
    anchor.begin()
    Ledger(run_dir / "ledger.jsonl").append(ev.Note(text="x"), expected_seq=2)
    kept, why = anchor.flush("note")
    assert [a.seq for a in kept] == [3] and why is not None and "cannot append to the anchor log" in why


# --- the judge's own uid -----------------------------------------------------------------------------

JUDGE, AGENT, GROUP = "pw-judge", "pw-agent", "pw-agents"


def test_in_the_judge_uid_setup_the_agent_writes_its_workspace_and_nothing_else(run, tmp_path):
    """docs/trust-model.md, "The judge's own uid": the run belongs to the judge, the agent's uid
    (in the judge's group) may write only the candidate workspaces `pw prepare` shares with it;
    the forger's writes to the ledger, the evidence, the projections and the anchor log are refused."""
    judge, agent = python_as(JUDGE), python_as(AGENT)
    if judge is None or agent is None:
        pytest.skip(f"needs root and the users {JUDGE} and {AGENT} (in group {GROUP}) that .ci/setup makes")
    import grp
    import pwd
    import tempfile

    # Reachable by both users, unlike tmp_path (pytest's base directory is its owner's alone).
    home = Path(tempfile.mkdtemp(prefix="pw-judge-test-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None))
    os.chmod(home, 0o755)
    (home / "runs").mkdir()
    shutil.move(str(run), home / "runs" / run.name)
    run = home / "runs" / run.name
    uid, gid = pwd.getpwnam(JUDGE).pw_uid, grp.getgrnam(GROUP).gr_gid
    for path in (home, *home.rglob("*")):
        os.lchown(path, uid, gid)
    log = home / "judge-state" / "anchors.jsonl"
    env = ["env", f"{anchor.ENV}={log}", "PW_AGENT_GROUP=" + GROUP]
    try:
        made = subprocess.run([*env, *judge, "-m", "pw.cli", "prepare", str(run), "--candidate", "z:baseline:try"],
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        assert log.is_file() and " anchor " in made.stderr
        ws = run / "candidates" / "z" / "src"
        targets = [ws / "kernel.py", run / "ledger.jsonl", run / "raw" / "planted", run / "report.json", log,
                   run / "candidates" / CID / "src" / "kernel.py", run / "baseline" / "kernel.py"]
        script = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
for target in {[str(t) for t in targets]!r}:
    try:
        open(target, "a").write("# faster\\n")
        print("written", target)
    except OSError as exc:
        print("refused", target, exc.strerror)
from tests.test_evidence_integrity import forge
try:
    forge(Path({str(run)!r}), "faster")
    print("forged")
except PermissionError as exc:
    print("forger refused:", exc.strerror)
"""
        agent_run = subprocess.run([*agent, "-c", script], capture_output=True, text=True, timeout=120)
        assert agent_run.returncode == 0, agent_run.stderr
        said = agent_run.stdout.splitlines()
        # The agent edits its workspace, and nothing else: every write of the forger is refused.
        assert said[0] == f"written {targets[0]}", said
        assert said[1:-1] == [f"refused {t} Permission denied" for t in targets[1:]], said
        assert said[-1] == "forger refused: Permission denied", said
        assert pw_main("audit", run).code == 0  # the judge's run is as the judge left it
    finally:
        shutil.rmtree(home, ignore_errors=True)
