"""Every CLI rule of `pw kernel-profile` (seed 003), through the real parser, worker processes and
cache ledger, with the FAKE runner of tests/kernel_profile_fake.py standing in for CUDA."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pw.cli import main
from pw.kernel_profile import registry
from tests.kernel_profile_fake import FAKE_ENTRY

T = ["fake_matrix", "--backend", "fake"]


@pytest.fixture(autouse=True)
def fake_entry(monkeypatch, tmp_path):
    remove = registry.install(FAKE_ENTRY)
    monkeypatch.setenv("PW_PROFILE_GPUS", "0,1")  # no NVML in CI: pin two pretend devices
    monkeypatch.setenv("PW_FAKE_RUN_LOG", str(tmp_path / "measured.log"))
    monkeypatch.setenv("PYTHONPATH", str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    yield
    remove()


def kp(capsys, *argv):
    code = main(["kernel-profile", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip().startswith("{") else out), err


def specs_file(tmp_path, specs, form="list", name="specs.json"):
    p = tmp_path / name
    if form == "list":
        p.write_text(json.dumps(specs))
    elif form == "wrapped":
        p.write_text(json.dumps({"specs": specs}))
    elif form == "object":
        assert len(specs) == 1
        p.write_text(json.dumps(specs[0]))
    elif form == "jsonl":
        p.write_text("\n".join(json.dumps(s) for s in specs) + "\n")
    return str(p)


def measured(tmp_path) -> list[str]:
    """The specs the fake runner really measured (its tunings are logged apart, as "tune,...")."""
    log = tmp_path / "measured.log"
    return [x for x in log.read_text().splitlines() if not x.startswith("tune,")] if log.exists() else []


def tunings(tmp_path) -> list[str]:
    log = tmp_path / "measured.log"
    return [x for x in log.read_text().splitlines() if x.startswith("tune,")] if log.exists() else []


SPECS = [{"rows": r, "cols": c, "dtype": "bf16"} for r in (1, 2) for c in (8, 16)]


def db_args(tmp_path):
    return ["--gpu-name", "FAKE", "--db", str(tmp_path / "c" / "profile.db"), "--json"]


def test_list_shows_entries_with_kind_args_metrics_env_and_count_fn(capsys):
    code, body, _ = kp(capsys, "list", "--json")
    assert code == 0
    by = {(e["table"], e["backend"]): e for e in body["entries"]}
    gemm = by[("single_gemm", "torch")]
    assert [a["name"] for a in gemm["args"]] == ["m", "n", "k", "dtype"]
    assert gemm["metric_family"] == ["time_ms", "tflops", "memory_bandwidth_gbps", "energy_j"]
    assert by[("all_reduce", "nccl")]["metric_family"] == [
        "time_ms", "algbw_gbps", "busbw_gbps", "message_size_bytes", "energy_j"]
    assert by[("all_reduce", "nccl")]["gpu_count_fn"].endswith(":num_gpus_field")
    assert gemm["env"] and gemm["kernel_kind"] == "compute"
    assert {("rmsnorm", "torch"), ("attention", "torch")} <= set(by)


@pytest.mark.parametrize("form", ["list", "wrapped", "jsonl"])
def test_all_spec_file_forms_give_the_same_answer(capsys, tmp_path, form):
    code, body, _ = kp(capsys, "query", *T, "--specs", specs_file(tmp_path, SPECS, form), *db_args(tmp_path))
    assert code == 0
    assert [r["args"]["rows"] for r in body["results"]] == [1, 1, 2, 2]


def test_single_object_file_and_repeated_spec(capsys, tmp_path):
    code, body, _ = kp(capsys, "query", *T, "--specs", specs_file(tmp_path, SPECS[:1], "object"), *db_args(tmp_path))
    assert code == 0 and body["spec_count"] == 1
    code, body, _ = kp(capsys, "query", *T, "--spec", json.dumps(SPECS[0]), "--spec", json.dumps(SPECS[1]),
                       *db_args(tmp_path))
    assert code == 0 and body["spec_count"] == 2


@pytest.mark.parametrize("spec,needle", [
    ({"rows": 1, "cols": 2, "dtype": "bf16", "backend": "fake"}, "field 'backend' is a routing field"),
    ({"rows": 1, "dtype": "bf16"}, "missing field 'cols'"),
    ({"rows": 1, "cols": 2, "dtype": "bf16", "depth": 3}, "unknown field 'depth'"),
    ({"rows": "1", "cols": 2, "dtype": "bf16"}, "field 'rows': Expected `int`, got `str`"),
    ({"rows": 1, "cols": 2, "dtype": "int4"}, "field 'dtype'"),
    ({"m": 1, "n": 2, "k": 3, "dtype": "bf16"}, "belong to single_gemm/torch or single_gemm/triton, not fake_matrix/fake: mixed batch"),
])
def test_bad_specs_are_field_named_errors_exit_2(capsys, tmp_path, spec, needle):
    p = specs_file(tmp_path, [SPECS[0], spec])
    code, _, err = kp(capsys, "count-missing", *T, "--specs", p, *db_args(tmp_path))
    assert code == 2
    assert needle in err and "spec[1]" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_backend_only_through_flag(capsys, tmp_path):
    code, _, err = kp(capsys, "query", "fake_matrix", "--spec", json.dumps(SPECS[0]), *db_args(tmp_path))
    assert code == 2 and "--backend: required" in err
    code, _, err = kp(capsys, "query", "fake_matrix", "--backend", "torch", "--spec", json.dumps(SPECS[0]),
                      *db_args(tmp_path))
    assert code == 2 and "not registered for table 'fake_matrix'" in err


def test_query_exits_0_with_missing_rows_and_never_measures(capsys, tmp_path):
    code, body, _ = kp(capsys, "query", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 0
    assert body["missing_count"] == 4 and [r["status"] for r in body["results"]] == ["missing"] * 4
    assert measured(tmp_path) == []
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", specs_file(tmp_path, SPECS), *db_args(tmp_path))
    assert code == 0 and body["missing_count"] == 4 and measured(tmp_path) == []


def test_run_fills_misses_then_count_missing_is_zero_and_hits_are_not_remeasured(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS + [SPECS[0]])  # a duplicate: one result per spec, one measurement
    code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert code == 0
    assert len(body["results"]) == 5 and all(r["status"] == "ok" for r in body["results"])
    assert body["measured_count"] == 4 and len(measured(tmp_path)) == 4
    assert body["worker_slots"] == {"1": [[0], [1]]}  # chunked over both pinned devices
    assert {r["provenance"]["worker_gpus"] for r in body["results"]} == {"0", "1"}
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", p, *db_args(tmp_path))
    assert body["missing_count"] == 0
    more = specs_file(tmp_path, SPECS + [{"rows": 9, "cols": 9, "dtype": "fp32"}], name="more.json")
    code, body, _ = kp(capsys, "run", *T, "--specs", more, *db_args(tmp_path))
    assert code == 0 and body["measured_count"] == 1 and len(measured(tmp_path)) == 5


def test_force_remeasures_everything_as_new_events(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS)
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--force", *db_args(tmp_path))
    assert code == 0 and body["measured_count"] == 4 and len(measured(tmp_path)) == 8
    lines = (tmp_path / "c" / "profile.ledger.jsonl").read_text().splitlines()
    assert len(lines) == 8
    with sqlite3.connect(tmp_path / "c" / "profile.db") as con:
        assert con.execute("SELECT count(*) FROM fake_matrix").fetchone()[0] == 4


def test_force_and_fresh_are_mutually_exclusive(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["kernel-profile", "run", *T, "--spec", json.dumps(SPECS[0]), "--force", "--fresh"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_fresh_persists_nothing_and_counts_failed_runners(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS[:2])
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    db = tmp_path / "c" / "profile.db"
    ledger = tmp_path / "c" / "profile.ledger.jsonl"
    before = hashlib.sha256(db.read_bytes()).hexdigest(), ledger.read_bytes()
    bad = {"rows": 3, "cols": 3, "dtype": "bf16", "behavior": "error"}
    q = specs_file(tmp_path, SPECS + [bad], name="fresh.json")
    code, body, _ = kp(capsys, "run", *T, "--specs", q, "--fresh", *db_args(tmp_path))
    assert code == 1  # a runner failed: a row remains missing
    assert body["persisted"] is False and body["missing_count"] == 1
    assert [r.get("source") for r in body["results"][:4]] == ["fresh"] * 4
    assert body["results"][4]["status"] == "missing" and body["results"][4]["error"] == "runner_error"
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), ledger.read_bytes()) == before
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", q, *db_args(tmp_path))
    assert body["missing_count"] == 3  # the two never persisted plus the failed one


def test_crash_fails_only_its_spec_and_rerun_retries_only_missing(capsys, tmp_path):
    crash = {"rows": 5, "cols": 5, "dtype": "bf16", "behavior": "crash"}
    p = specs_file(tmp_path, [crash] + SPECS)
    code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert code == 1
    st = [r["status"] for r in body["results"]]
    assert st == ["missing", "ok", "ok", "ok", "ok"]
    assert body["results"][0]["error"] == "worker_crash"
    n = len(measured(tmp_path))
    code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert body["measured_count"] == 1 and len(measured(tmp_path)) == n  # only the crashed one again


def test_a_result_that_is_not_plain_data_fails_its_spec_not_the_worker(capsys, tmp_path):
    bad = {"rows": 4, "cols": 4, "dtype": "bf16", "behavior": "unencodable"}
    p = specs_file(tmp_path, [bad, SPECS[0], SPECS[2]])
    monkey_one_gpu = {"PW_PROFILE_GPUS": "0"}
    import os

    old = os.environ["PW_PROFILE_GPUS"]
    os.environ.update(monkey_one_gpu)
    try:
        code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    finally:
        os.environ["PW_PROFILE_GPUS"] = old
    assert code == 1
    assert [r["status"] for r in body["results"]] == ["missing", "ok", "ok"]
    assert body["results"][0]["error"] == "runner_error" and "not encodable" in body["results"][0]["message"]


def test_events_record_the_device_that_measured(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS)
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    with sqlite3.connect(tmp_path / "c" / "profile.db") as con:
        assert {r[0] for r in con.execute("SELECT device_index FROM fake_matrix")} == {0, 1}


def test_output_dir_snapshot_and_refusal(capsys, tmp_path):
    out = tmp_path / "snap"
    p = specs_file(tmp_path, [{"rows": r, "cols": c, "dtype": "bf16"} for r in (1, 2) for c in (4, 8, 16)])
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--output-dir", str(out), *db_args(tmp_path))
    assert code == 0
    assert sorted(f.name for f in out.iterdir()) == ["curve.json", "job.meta.json", "request.json", "results.json"]
    curve = json.loads((out / "curve.json").read_text())
    assert curve["axes"] == {"x": "rows", "y": "cols", "facets": []}
    assert curve["fixedArgs"] == {"dtype": "bf16", "behavior": "ok"}
    assert len(curve["points"]) == 6
    assert json.loads((out / "request.json").read_text())["specs"][0]["rows"] == 1
    code, _, err = kp(capsys, "run", *T, "--specs", p, "--output-dir", str(out), *db_args(tmp_path))
    assert code == 2 and "already holds a snapshot" in err
    assert len(measured(tmp_path)) == 6  # refused before measuring anything


def test_curve_facets_follow_declaration_order():
    from pw.kernel_profile.snapshot import curve

    res = [{"args": {"m": m, "n": 8, "k": k, "dtype": d}, "status": "ok", "metrics": {"time_ms": 1.0}}
           for m in (1, 2) for k in (3, 4) for d in ("bf16", "fp16")]
    c = curve(("m", "n", "k", "dtype"), ("time_ms",), res)
    assert c["axes"] == {"x": "m", "y": "k", "facets": ["dtype"]} and c["fixedArgs"] == {"n": 8}


def test_gpu_name_is_a_key_not_a_selector(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS[:2])
    base = ["--db", str(tmp_path / "c" / "profile.db"), "--json"]
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--gpu-name", "KEY-A", *base)
    assert body["gpu_name"] == "KEY-A" and body["gpu_name_source"] == "argument"
    assert body["devices"] == [0, 1]  # the same devices whatever the key
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", p, "--gpu-name", "KEY-B", *base)
    assert body["missing_count"] == 2  # rows of KEY-A are not rows of KEY-B
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", p, "--gpu-name", "KEY-A", *base)
    assert body["missing_count"] == 0


def test_db_is_task_scoped_and_default_comes_from_env(capsys, tmp_path, monkeypatch):
    p = specs_file(tmp_path, SPECS[:1])
    monkeypatch.setenv("PW_PROFILE_DB", str(tmp_path / "default" / "profile.db"))
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--gpu-name", "FAKE", "--json")
    assert body["db"] == str(tmp_path / "default" / "profile.db")
    code, body, _ = kp(capsys, "count-missing", *T, "--specs", p, "--gpu-name", "FAKE", "--db",
                       str(tmp_path / "other.db"), "--json")
    assert body["missing_count"] == 1
    code, _, err = kp(capsys, "query", *T, "--specs", p, "--gpu-name", "FAKE", "--db", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_unverified_row_is_not_a_hit(capsys, tmp_path, monkeypatch):
    p = specs_file(tmp_path, SPECS[:1])
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    import dataclasses

    registry._ENTRIES[("fake_matrix", "fake")] = dataclasses.replace(FAKE_ENTRY, profiler_revision="fake-2")
    code, body, _ = kp(capsys, "query", *T, "--specs", p, *db_args(tmp_path))
    assert body["results"][0]["status"] == "unverified" and body["unverified_count"] == 1
    assert "profiler revision" in body["results"][0]["unverified_reason"]
    code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert body["measured_count"] == 1 and body["results"][0]["status"] == "ok"


def test_pinned_gpus_warn_and_too_few_gpus_is_a_clear_error(capsys, tmp_path, monkeypatch):
    p = specs_file(tmp_path, SPECS[:1])
    code, _, err = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert "bypasses the idle-GPU guard" in err
    from pw.kernel_profile import executor

    with pytest.raises(Exception) as exc:
        executor.plan([1, 2, 4], executor.Devices([0, 1], True))
    assert "needs 4 idle GPU(s), found 2" in str(exc.value)
    monkeypatch.setenv("PW_PROFILE_GPUS", "0,x")
    code, _, err = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert code == 2 and "PW_PROFILE_GPUS" in err


def test_measure_refuses_comm_and_multi_spec(capsys, tmp_path):
    code, _, err = kp(capsys, "measure", "all_reduce", "--backend", "nccl", "--spec",
                      json.dumps({"message_size_bytes": 1024, "num_gpus": 2, "dtype": "bf16"}),
                      "--output-dir", str(tmp_path / "m"))
    assert code == 2 and "comm kernel" in err
    code, _, err = kp(capsys, "measure", *T, "--spec", json.dumps(SPECS[0]), "--spec", json.dumps(SPECS[1]),
                      "--output-dir", str(tmp_path / "m"))
    assert code == 2 and "exactly one spec" in err


def test_rebuild_from_cache_ledger_is_byte_identical(capsys, tmp_path):
    from pw.kernel_profile.cache import Cache

    p = specs_file(tmp_path, SPECS)
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    kp(capsys, "run", *T, "--specs", p, "--force", *db_args(tmp_path))
    db = tmp_path / "c" / "profile.db"
    first = db.read_bytes()
    db.unlink()
    Cache(db).rebuild()
    assert db.read_bytes() == first


def test_fake_is_not_reachable_without_the_test_hook():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pw.cli", "kernel-profile", "list", "--json"],
                         capture_output=True, text=True, check=True)
    assert "fake" not in out.stdout


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["m", "n", "k", "dtype", "backend", "specs", "x"]), inner, max_size=5),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(doc=json_values, form=st.sampled_from(["json", "jsonl"]))
def test_any_specs_file_gives_typed_specs_or_one_input_error(tmp_path_factory, doc, form):
    from ledger.errors import InputError
    from pw.kernel_profile import specs as spec_mod

    entry = registry.lookup("single_gemm", "torch")
    p = tmp_path_factory.mktemp("s") / "specs"
    if form == "jsonl" and isinstance(doc, list):
        p.write_text("\n".join(json.dumps(d) for d in doc))
    else:
        p.write_text(json.dumps(doc))
    try:
        got = spec_mod.parse(entry, spec=None, specs_path=str(p))
    except InputError as exc:
        assert "\n" not in exc.message and str(p) in exc.message
    else:
        assert got and all(isinstance(g, entry.args) for g in got)


def test_a_worker_that_keeps_dying_stops_being_restarted(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PW_PROFILE_GPUS", "0")
    crash = [{"rows": r, "cols": 1, "dtype": "bf16", "behavior": "crash"} for r in range(1, 6)]
    code, body, _ = kp(capsys, "run", *T, "--specs", specs_file(tmp_path, crash), *db_args(tmp_path))
    assert code == 1 and body["missing_count"] == 5
    messages = [r["message"] for r in body["results"]]
    assert sum(m.startswith("worker died") for m in messages) == 3  # three workers started, three died
    assert sum(m.startswith("not measured: 3 workers in a row died") for m in messages) == 2
