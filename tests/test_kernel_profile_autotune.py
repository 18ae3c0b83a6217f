"""The autotune cache: one tuning per (kernel, shape key, GPU key, library versions), shared by the
workers of a batch and by later runs, recorded in each row's provenance. The FAKE runner tunes
through the same worker-side cache the Triton runner uses (its tuning sleeps, then is logged)."""

from __future__ import annotations

import json
import threading

import pytest

from pw.kernel_profile.autotune_cache import AutotuneCache, Tuned, key_digest
from tests.test_kernel_profile_cli import T, db_args, fake_entry, kp, specs_file, tunings  # noqa: F401

# Rows 3 and 4 share the bucket 4 (one key); rows 5 and 8 share the bucket 8 (another key).
SPECS = [{"rows": r, "cols": 16, "dtype": "bf16", "behavior": "autotune"} for r in (3, 4, 5, 8)]


@pytest.fixture(autouse=True)
def slow_tuning(monkeypatch):
    monkeypatch.setenv("PW_FAKE_TUNE_S", "0.4")


def by_rows(body) -> dict[int, dict]:
    return {r["args"]["rows"]: r["provenance"] for r in body["results"]}


def test_two_workers_tune_each_key_once_and_a_later_run_tunes_nothing(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS)
    code, body, _ = kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    assert code == 0 and body["worker_slots"] == {"1": [[0], [1]]}
    assert sorted(tunings(tmp_path)) == ["tune,4,16,bf16", "tune,8,16,bf16"]  # two keys, two tunings
    prov = by_rows(body)
    for a, b in ((3, 4), (5, 8)):
        assert prov[a]["autotune_key"] == prov[b]["autotune_key"]
        assert {prov[a]["autotune"], prov[b]["autotune"]} == {"tuned", "cache"}
    assert {p["worker_gpus"] for p in prov.values()} == {"0", "1"}  # both workers took part
    assert body["autotune"] == {**body["autotune"], "keys": 2, "tuned": 2, "reused": 0, "saved_s": 0}
    assert body["autotune"]["tuning_s"] >= 0.8
    # A later run (fresh worker processes) re-measures every row and tunes nothing.
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--force", *db_args(tmp_path))
    assert code == 0 and len(tunings(tmp_path)) == 2
    assert {p["autotune"] for p in by_rows(body).values()} == {"cache"}
    assert body["autotune"]["tuned"] == 0 and body["autotune"]["reused"] == 2
    assert body["autotune"]["saved_s"] >= 0.8  # two keys' 0.4 s tunings, not paid again
    # The rows in the database carry the tuning they ran with.
    code, body, _ = kp(capsys, "query", *T, "--specs", p, *db_args(tmp_path))
    assert all(r["provenance"]["autotune_config"] == "BLOCK=64" for r in body["results"])


def test_a_second_worker_waits_for_a_tuning_in_progress(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PW_FAKE_TUNE_S", "1.5")  # far longer than the two workers' start-up skew
    same = [{"rows": r, "cols": 16, "dtype": "bf16", "behavior": "autotune"} for r in (3, 4)]
    code, body, _ = kp(capsys, "run", *T, "--specs", specs_file(tmp_path, same), *db_args(tmp_path))
    assert code == 0 and len(tunings(tmp_path)) == 1
    prov = by_rows(body)
    waited = [float(p["autotune_wait_s"]) for p in prov.values() if p["autotune"] == "cache"]
    assert {p["worker_gpus"] for p in prov.values()} == {"0", "1"} and waited and waited[0] > 0.05


def test_another_library_version_is_another_key(capsys, tmp_path, monkeypatch):
    p = specs_file(tmp_path, SPECS[:1])
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    monkeypatch.setenv("PW_FAKE_LIBRARY_VERSION", "2")
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--force", *db_args(tmp_path))
    assert code == 0 and len(tunings(tmp_path)) == 2 and by_rows(body)[3]["autotune"] == "tuned"


def test_an_unreadable_entry_is_tuned_again_and_the_row_says_so(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS[:1])
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    (entry,) = (tmp_path / "c" / "profile.autotune").glob("*.json")
    entry.write_text('{"format": 1, "kernel": "trunc')
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--force", *db_args(tmp_path))
    prov = by_rows(body)[3]
    assert prov["autotune"] == "tuned" and "unreadable" in prov["autotune_note"] and len(tunings(tmp_path)) == 2
    assert json.loads(entry.read_text())["kernel"] == "fake_kernel/1"  # mended


def test_fresh_uses_stored_tunings_and_stores_none(capsys, tmp_path):
    p = specs_file(tmp_path, SPECS[:1])
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--fresh", *db_args(tmp_path))
    assert code == 0 and by_rows(body)[3]["autotune"] == "tuned"
    assert not (tmp_path / "c").exists()  # neither the database nor the autotune cache
    kp(capsys, "run", *T, "--specs", p, *db_args(tmp_path))
    code, body, _ = kp(capsys, "run", *T, "--specs", p, "--fresh", *db_args(tmp_path))
    assert by_rows(body)[3]["autotune"] == "cache" and len(tunings(tmp_path)) == 2


def test_threads_of_one_process_share_the_folder_too(tmp_path):
    tuned = []

    def tune():
        tuned.append(1)
        return Tuned({"X": 1}, 1, {"X=1": 1.0})

    got = []

    def worker():
        got.append(AutotuneCache(tmp_path / "a").get("k", {"n": "1"}, "GPU", {"lib": "1"}, tune).source)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tuned) == 1 and sorted(got) == ["cache", "cache", "cache", "tuned"]
    assert key_digest("k", {"n": "1"}, "GPU", {"lib": "1"}) != key_digest("k", {"n": "1"}, "GPU2", {"lib": "1"})
