"""remote.yaml, --remote-set, the Slurm output parsers (on output recorded from .ci/slurm's cluster,
tests/data/slurm/) and the fill's plan: no cluster needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters import slurm
from ledger.errors import InputError
from pw.remote import config
from pw.remote.kernel_fill import plan_chunks

DATA = Path(__file__).parent / "data" / "slurm"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "remote.yaml"
    path.write_text(text)
    return str(path)


def test_a_remote_is_read_with_its_defaults_and_one_field_changed_for_one_call(tmp_path):
    path = write(tmp_path, "remotes:\n  gpu:\n    kind: slurm\n    partition: h200\n    options: [--account=x]\n")
    r = config.load("gpu", config=path)
    assert (r.kind, r.partition, r.time, r.tasks, r.gpus_per_task, r.options, r.name) == \
        ("slurm", "h200", "01:00:00", 8, None, ["--account=x"], "gpu")
    # The seed's spelling and the plain one; times stay text (YAML would read 1:30 as 90).
    r = config.load("gpu", config=path, overrides=["launch.slurm.time=1:30", "tasks=3", "gpus_per_task=2"])
    assert (r.time, r.tasks, r.gpus_per_task) == ("1:30", 3, 2)


@pytest.mark.parametrize("text, overrides, needle", [
    ("remotes:\n  gpu:\n    kind: pbs\n", [], "remote 'gpu': Invalid enum value 'pbs' - at `$.kind`"),
    ("remotes:\n  gpu:\n    kind: slurm\n    colour: blue\n", [], "Object contains unknown field `colour`"),
    ("remotes:\n  gpu:\n    kind: slurm\n    tasks: 0\n", [], "tasks 0: expected at least 1"),
    ("remotes: [1, 2]\n", [], "not a remote config"),
    ("remotes:\n  gpu: {kind: slurm\n", [], "not a remote config"),
    ("remotes:\n  gpu:\n    kind: slurm\n", ["tasks"], "expected KEY=VALUE"),
    ("remotes:\n  gpu:\n    kind: slurm\n", ["name=x"], "unknown field 'name'"),
    ("remotes:\n  gpu:\n    kind: slurm\n", ["tasks=many"], "Expected `int`"),
    ("remotes:\n  other:\n    kind: slurm\n", [], "--remote gpu: not a configured remote (remotes in"),
    ("remotes:\n  gpu:\n    kind: slurm\n    env: {'A; rm -rf x': '1'}\n", [], "env name 'A; rm -rf x': expected a shell"),
])
def test_a_bad_remote_config_is_one_line_naming_the_file_and_field(tmp_path, text, overrides, needle):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        config.load("gpu", config=path, overrides=overrides)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_local_needs_no_file_and_a_named_file_must_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PW_REMOTE_CONFIG", raising=False)
    assert config.load("local").kind == "local"
    with pytest.raises(InputError, match="no remote.yaml found"):
        config.load("gpu")
    with pytest.raises(InputError, match="--remote-config .*/nope.yaml: no such file"):
        config.load("gpu", config=str(tmp_path / "nope.yaml"))
    (tmp_path / "remote.yaml").write_text("remotes:\n  gpu: {kind: slurm}\n")
    assert config.load("gpu").kind == "slurm"  # ./remote.yaml, as the seed keeps it in the checkout


def test_squeue_lines_give_each_task_and_a_pending_range():
    expanded = slurm.parse_queue("26", (DATA / "squeue-running.txt").read_text())
    assert [(t.task, t.state, t.nodes) for t in expanded] == \
        [(2, "PENDING", ""), (3, "PENDING", ""), (1, "RUNNING", "n2"), (0, "RUNNING", "n1")]
    ranged = slurm.parse_queue("26", (DATA / "squeue-pending-range.txt").read_text())
    assert [(t.task, t.state) for t in ranged] == [(-1, "PENDING"), (1, "RUNNING"), (0, "RUNNING")]
    assert slurm.parse_queue("27", (DATA / "squeue-running.txt").read_text()) == []


def test_scontrol_records_give_each_tasks_state_node_and_exit_code():
    live = {t.task: t for t in slurm.parse_records((DATA / "scontrol-array.txt").read_text())}
    assert (live[1].state, live[1].nodes, live[1].exit_code) == ("CANCELLED", "n2", "143:0")
    assert (live[3].state, live[3].nodes, live[3].reason) == ("PENDING", "", "Resources")
    assert {t.job_id for t in live.values()} == {"26"}
    done = slurm.parse_records((DATA / "scontrol-array-cancelled.txt").read_text())
    assert {t.state for t in done} == {"CANCELLED"} and len(done) == 4


def test_a_fill_is_chunked_into_at_most_tasks_chunks_each_spec_once():
    todo = [{"rows": r, "cols": 8, "dtype": "bf16"} for r in range(1, 41)]
    chunks = plan_chunks(todo, 2)
    assert len(chunks) == 2 and sorted(len(c) for c in chunks) == [20, 20]
    assert sorted(a["rows"] for c in chunks for a in c) == list(range(1, 41))
    assert len(plan_chunks(todo[:3], 8)) == 3  # never an empty task


def test_the_node_runs_the_same_command_without_the_remote_flags():
    from pw.remote.campaign import local_argv

    argv = ["evaluate", "runs/r", "a", "--remote", "cpu", "--json", "--remote-set", "time=1:00",
            "--remote-config=/x/remote.yaml", "--remote-set=partition=p", "--max-pairs", "6"]
    assert local_argv(argv) == ["evaluate", "runs/r", "a", "--json", "--max-pairs", "6"]
    assert local_argv(["confirm", "r", "a", "--fresh"]) == ["confirm", "r", "a", "--fresh"]
