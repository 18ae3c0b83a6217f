"""Partial children (issue 30): HPCToolkit, GVProf, DrGPUM and GPA do not run here; pw imports what
they wrote elsewhere (`pw import RUN TOOL=PATH`) through partial adapters.

One shared class checks every importer on its fixture under tests/data/<tool>-cuda-histogram-<format>/
(the documented output format, with a README saying where its shape comes from): read + normalize
into the common profile, what the metrics are (time or not), the declared gate limits, refusal to
capture, and one-line errors for wrong paths. Then routing is shown never to pick or credit a
partial adapter, and the four fixtures are imported into a recorded GPU run of the same workload.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from adapters.base import CaptureError, CaptureRequest, Usability
from adapters.drgpum import DrgpumAdapter
from adapters.gpa import GpaAdapter
from adapters.gvprof import GvprofAdapter
from adapters.hpctoolkit import HpctoolkitAdapter
from adapters.partial import PartialAdapter
from adapters.registry import installed_specs, partial_adapters
from ledger.errors import InputError
from ledger.metrics import KNOWN_METRICS
from ledger.profile import decode_profile, encode_profile
from pw.agent.tokens import count_tokens
from pw.rules.gates import GATE_NAMES
from pw.rules.routing import claimable_gates, reprofile_adapters, route
from tests.conftest import pw_main

DATA = Path(__file__).parent / "data"
KNOWN = ["histogram.cu", "histogram.h", "main.cu", "Makefile"]  # the workload's tree


@functools.lru_cache(maxsize=None)
def _read(_key: str, adapter: PartialAdapter, fixture: str):
    """Each fixture read once per session (Hatchet's first read loads pandas: seconds on CI)."""
    arts = adapter.read(str(DATA / fixture))
    return arts, adapter.normalize(arts, "/nowhere", "baseline", known_files=KNOWN)


class PartialContract:
    """What every partial adapter must do with its fixture. Subclasses set the four class fields."""

    adapter: ClassVar[PartialAdapter]
    fixture: ClassVar[str]  # path under tests/data handed to `read`
    time_metric: ClassVar[bool]  # is the primary metric a time?
    hot: ClassVar[str]  # the operation id the fixture makes hottest

    def profile(self):
        return _read(type(self).__name__, self.adapter, self.fixture)

    def test_fixture_has_a_readme_naming_its_source(self):
        readme = DATA / Path(self.fixture).parts[0] / "README.md"
        text = " ".join(readme.read_text().split())
        assert "Not a capture" in text and "does not run here" in text and "follow" in text, readme

    def test_declared_partial_with_the_gates_it_cannot_pass(self):
        spec = self.adapter.spec
        assert spec.partial and not spec.can_reprofile and spec.ceiling == "proposed"
        assert "mechanism" in spec.gate_limits and set(spec.gate_limits) <= set(GATE_NAMES)
        doc = json.loads((Path(__file__).parents[1] / "adapters" / "registry.json").read_text())
        row = next(a for a in doc["adapters"] if a["name"] == spec.name)
        assert row["partial"] is True and row["can_reprofile"] is False and "mechanism" in row["gate_limits"]

    def test_imports_its_fixture_into_a_normalized_profile(self):
        arts, p = self.profile()
        assert p.tool == self.adapter.spec.name and p.target == "baseline"
        assert set(p.metrics) <= set(self.adapter.spec.measures)
        assert all(m in KNOWN_METRICS for m in p.metrics)
        assert p.top_operations(1)[0].id == self.hot
        assert decode_profile(encode_profile(p)) == decode_profile(encode_profile(p))  # canonical, decodable
        spec = KNOWN_METRICS[p.primary_metric]
        assert (spec.kind == "time") == self.time_metric, (p.primary_metric, spec.kind)
        if not self.time_metric:  # the ids say what they count; nothing they measure is a time
            assert all(KNOWN_METRICS[m].kind != "time" for m in self.adapter.spec.measures)
            assert "mechanism" in self.adapter.spec.gate_limits and "not time" in self.adapter.spec.gate_limits["mechanism"]
        if spec.kind != "ratio":
            top = p.top_operations(1)[0].self_metrics[p.primary_metric]
            assert 0 < top <= p.totals[p.primary_metric] * (1 + 1e-9)

    def test_never_captures(self, tmp_path):
        with pytest.raises(CaptureError, match="partial"):
            self.adapter.capture(CaptureRequest(argv=["true"], cwd=str(tmp_path), out_dir=str(tmp_path)))
        u = self.adapter.probe()
        assert isinstance(u, Usability) and u.mode == "import-only"

    def test_a_wrong_path_is_one_clear_line(self, tmp_path):
        for bad in (tmp_path / "missing", tmp_path):
            with pytest.raises(InputError) as exc:
                self.adapter.read(str(bad))
            assert "\n" not in exc.value.message and self.adapter.spec.name in exc.value.message


class TestHpctoolkit(PartialContract):
    adapter = HpctoolkitAdapter()
    fixture = "hpctoolkit-cuda-histogram-xml/database"
    time_metric = True
    hot = "histogram_kernel@histogram.cu"

    def test_calling_context_self_inclusive_and_lines(self):
        arts, p = self.profile()
        assert "hatchet-tree.json" in arts  # what Hatchet read, kept beside the database
        main = p.operation("main@main.cu")
        # main's own cost is its statement (0.15 s of input generation); inclusive adds its callees
        assert main.self_metrics == {"cpu_time_s": pytest.approx(0.15)}
        assert main.inclusive_metrics["cpu_time_s"] == pytest.approx(0.163)
        kernel = p.operation(self.hot)
        assert kernel.kind == "kernel" and kernel.self_metrics["kernel_launches"] == 20
        assert {(lc.line, lc.self_metrics["gpu_pc_samples"]) for lc in p.lines_of(self.hot)} == {(9, 1200), (11, 22800)}
        assert p.totals["gpu_time_ns"] == pytest.approx(0.024e9)
        assert any(e.callee == self.hot for e in p.edges)
        assert p.operation("cudaMemcpy@[libcudart.so.12]").file is None  # outside the tree: no source

    def test_sparse_database_is_refused_clearly(self, tmp_path):
        (tmp_path / "meta.db").write_bytes(b"HPCTOOLKITmeta")
        with pytest.raises(InputError, match="meta.db"):
            self.adapter.read(str(tmp_path))


class TestGvprof(PartialContract):
    adapter = GvprofAdapter()
    fixture = "gvprof-cuda-histogram-csv/gvprof-measurements"
    time_metric = False
    hot = "kernel-context-6@[gpu]"

    def test_redundancy_counts_per_kind(self):
        _, p = self.profile()
        k = p.operation(self.hot).self_metrics
        assert k["spatial_redundant_reads_count"] == 41943040 and k["temporal_redundant_writes_count"] == 20971520
        assert k["redundant_accesses_count"] == sum(k[m] for m in ("spatial_redundant_reads_count",
                                                                   "temporal_redundant_reads_count",
                                                                   "temporal_redundant_writes_count"))
        assert p.totals["monitored_accesses_count"] == 83886080  # one thread, counted once, not per file

    def test_a_broken_section_names_file_and_line(self):
        with pytest.raises(ValueError, match="spatial_read_t0.csv line 2"):
            self.adapter.normalize({"redundancy/spatial_read_t0.csv": b"kernel_id,1\nnot a header\n1,2,3\n"},
                                   "/x", "baseline")


class TestDrgpum(PartialContract):
    adapter = DrgpumAdapter()
    fixture = "drgpum-cuda-histogram-txt/gvprof-measurements"
    time_metric = False
    hot = "allocation-3@[device]"

    def test_peak_bytes_and_unused_allocation(self):
        _, p = self.profile()
        assert p.totals["device_peak_bytes"] == 36781312 and p.totals["device_min_peak_bytes"] == 20004096
        assert p.operation("allocation-5@[device]").self_metrics["unaccessed_bytes"] == 16777216
        assert p.totals["unaccessed_bytes"] == 16777216  # the only allocation nothing touched


class TestGpa(PartialContract):
    adapter = GpaAdapter()
    fixture = "gpa-cuda-histogram-advice/gpa-database"
    time_metric = False
    hot = "histogram_kernel(unsigned int const*, long, unsigned int*, int)@[gpu]"

    def test_suggestions_merge_repeated_blocks_and_point_at_lines(self):
        arts, p = self.profile()
        k = p.operation(self.hot).self_metrics
        assert k == {"advice_stall_ratio": pytest.approx(0.58312), "advice_estimated_speedup": pytest.approx(1.872)}
        assert max(p.lines_of(self.hot), key=lambda lc: lc.self_metrics["advice_stall_ratio"]).line == 11
        said = self.adapter.findings(arts, KNOWN)
        assert said[0].startswith("GPA GPUGlobalMemoryReductionOptimizer") and "histogram.cu:11" in said[0]
        assert not any("Occupancy" in s for s in said)  # `infx`: no ratio-weighted evidence, not ranked
        assert KNOWN_METRICS["advice_estimated_speedup"].simulated  # a model's number, marked so


# --- routing never claims a gate a partial child cannot pass ---------------------------------------------

OK = Usability(usable=True, reason="ok", version="1")


@pytest.mark.parametrize("spec", [a.spec for a in partial_adapters()], ids=lambda s: s.name)
def test_routing_never_picks_or_credits_a_partial_adapter(spec):
    usable = {s.name: OK for s in installed_specs()}
    only_it = {spec.name: OK}
    for needs in (spec.measures[:1], spec.granularity[:1]):
        for phase in ("discovery", "diagnosis"):
            for lang in spec.targets:
                d = route(phase, needs, 1.0, installed_specs(), usable, lang)
                assert d.chosen != spec.name
                alone = route(phase, needs, 1.0, installed_specs(), only_it, lang)
                assert alone.chosen is None
                assert any(r.adapter == spec.name and r.reason.startswith("partial:") for r in alone.rejected)
    chosen, why = reprofile_adapters("perf", spec.name, 1.0, installed_specs())
    assert chosen == ["perf"] and "cannot reprofile" in why
    gates = claimable_gates(spec, GATE_NAMES)
    assert gates["mechanism"].startswith("never:") and gates["correctness"] == "open"


def test_partial_adapters_are_the_four_documented_tools():
    assert sorted(a.spec.name for a in partial_adapters()) == ["drgpum", "gpa", "gvprof", "hpctoolkit"]
    assert all(not s.partial for s in installed_specs() if s.name not in ("drgpum", "gpa", "gvprof", "hpctoolkit"))


# --- the command line: all four into a recorded GPU run of the same workload -----------------------------

FIXTURES = {"hpctoolkit": TestHpctoolkit.fixture, "gvprof": TestGvprof.fixture, "drgpum": TestDrgpum.fixture,
            "gpa": TestGpa.fixture}


def test_pw_import_writes_profiles_briefs_and_cost_into_a_recorded_run(tmp_path, monkeypatch):
    run = tmp_path / "histogram-run"
    shutil.copytree(DATA / "gpu-loop-h200" / "histogram-run", run)
    monkeypatch.setenv("PW_ACTOR", "agent-gpu")
    r = pw_main("import", run, *(f"{t}={DATA / f}" for t, f in FIXTURES.items()), "--json")
    assert r.code == 0, r
    doc = json.loads(r.out)
    assert [i["adapter"] for i in doc["imports"]] == list(FIXTURES)
    assert all(i["ceiling"] == "proposed" and "mechanism" in i["cannot_pass"] for i in doc["imports"])
    for tool in FIXTURES:
        brief = (run / "imports" / tool / "agent-brief.txt").read_text()
        assert count_tokens(brief) <= 320 and "ceiling proposed" in brief and "pw prepare" in brief
        assert "histogram" in brief
        v = pw_main("validate", run / "imports" / tool / "profile.json")
        assert v.code == 0, v
    assert "NOT time" in (run / "imports" / "gvprof" / "agent-brief.txt").read_text()
    assert "histogram.cu:11" in (run / "imports" / "hpctoolkit" / "agent-brief.txt").read_text()
    cost = json.loads((run / "cost.json").read_text())
    mine = cost["actors"]["agent-gpu"]["emitted"]
    assert [e["name"] for e in mine] == [f"imports/{t}/agent-brief.txt" for t in FIXTURES]
    assert cost["total"] == sum(a["tokens"] for a in cost["actors"].values())
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
    # the audit renormalizes every import from its stored artifacts: an edited artifact is caught
    import hashlib

    from ledger.events import ProfileImported
    from ledger.evidence import EvidenceStore
    from pw.app.imports import renormalize_import
    from tests.conftest import ledger_events

    imports = [e.data for e in ledger_events(run) if isinstance(e.data, ProfileImported)]
    for imp in imports:  # the few files recorded in the event give the profile the whole tree gave
        again = renormalize_import(EvidenceStore(run / "raw"), imp)
        assert hashlib.sha256(again).hexdigest() == imp.profile_sha256, imp.adapter
    assert next(i for i in imports if i.adapter == "hpctoolkit").files == ["histogram.cu", "main.cu"]
    gv = next(i for i in imports if i.adapter == "gvprof")
    raw = run / "raw" / gv.artifacts["redundancy/temporal_write_t0.csv"][:2] / gv.artifacts["redundancy/temporal_write_t0.csv"]
    raw.chmod(0o644)
    raw.write_bytes(raw.read_bytes().replace(b"20971520", b"20971521"))
    edited = pw_main("audit", run)
    assert edited.code == 1 and "evidence" in edited.out, edited  # caught first by the hash of the evidence
    tokens = pw_main("tokens", "--json", "--run", run).json()["run"]["files"]
    imported = {f["path"]: f for f in tokens if f["kind"] == "import-brief"}
    assert sorted(imported) == sorted(f"imports/{t}/agent-brief.txt" for t in FIXTURES)
    assert all(f["limit"] == 320 and f["tokens"] <= 320 for f in imported.values())


def test_bad_import_arguments_are_refused_before_anything_is_recorded(tmp_path):
    run = tmp_path / "histogram-run"
    shutil.copytree(DATA / "gpu-loop-h200" / "histogram-run", run)
    before = (run / "ledger.jsonl").read_bytes()
    for args, what in ((["perf=/tmp"], "not an importing"), (["gvprof"], "TOOL=PATH"),
                       ([f"gvprof={DATA / TestGvprof.fixture}", "gpa=/nonexistent"], "no such file"),
                       ([f"gvprof={DATA / TestGvprof.fixture}", "--target", "nope"], "--target")):
        r = pw_main("import", run, *args)
        assert r.code == 2 and r.err.count("\n") == 1 and what in r.err, (args, r)
    assert (run / "ledger.jsonl").read_bytes() == before  # all or none: the valid gvprof was not recorded
    r = pw_main("start", "--workload", tmp_path / "none", "--import", "bogus=1")
    assert r.code == 2 and "bogus" in r.err and not (tmp_path / "runs").exists()
