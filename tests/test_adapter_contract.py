"""The shared adapter contract (subclassed in a few lines per adapter) and tests of adapters.base.

Each adapter test provides: a factory, a checked-in fixture directory of real tool output under
``tests/data/<tool>-<workload>-<format>/`` (files named by artifact role, plus ``expected.json``),
and a workload builder for a live capture. The contract then checks probe, normalization of the
fixture, profile invariants, a real capture, and failure handling.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from adapters.base import (
    Adapter,
    AdapterSpec,
    CaptureError,
    CaptureRequest,
    Usability,
    read_artifacts,
    relative_to_root,
    run_tool,
)
from ledger.metrics import is_known
from ledger.profile import GRANULARITIES, Profile, decode_profile, encode_profile

DATA = Path(__file__).parent / "data"

# A C program with one clearly hot function; reps come from argv so tests can size the run.
HOT_C = r"""#include <stdio.h>
#include <stdlib.h>

static double cold_sum(const double *a, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) double hot_kernel(double *a, int n, int reps) {
    double acc = 0.0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n; i++) {
            a[i] = a[i] * 1.0000001 + 0.5;
            acc += a[i] / (1.0 + a[(i * 7) % n]);
        }
    }
    return acc;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    int n = 100000;
    double *a = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) a[i] = i * 0.001;
    double r = hot_kernel(a, n, reps);
    printf("%f %f\n", r, cold_sum(a, n));
    free(a);
    return 0;
}
"""

HOT_PY = """import sys


def cold(n):
    return sum(range(n))


def hot_loop(n):
    acc = 0
    for i in range(n):
        acc += (i * i) % 7
        acc ^= i
    return acc


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000
    print(hot_loop(n), cold(n // 10))


if __name__ == "__main__":
    main()
"""


def def_range(source: str, signature: str) -> tuple[int, int]:
    """1-based (first, last) line of the top-level function whose definition contains ``signature``:
    C ends at the next line that is exactly '}'; Python at the last indented line of the body."""
    lines = source.splitlines()
    start = next(i for i, ln in enumerate(lines) if signature in ln) + 1
    if signature.startswith("def "):
        body = [j + 1 for j in range(start, len(lines)) if lines[j].startswith("    ")]
        stop = next((j for j in range(start, len(lines)) if lines[j].strip()
                     and not lines[j].startswith(" ")), len(lines))
        return start, max(b for b in body if b <= stop)
    end = next(i for i in range(start, len(lines)) if lines[i] == "}") + 1
    return start, end


def build_hot_c(directory: Path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (gcc/cc) on PATH")
    src = directory / "hot.c"
    src.write_text(HOT_C)
    exe = directory / "hot"
    subprocess.run([cc, "-O2", "-g", "-o", str(exe), str(src)], check=True, capture_output=True)
    return exe


def write_hot_py(directory: Path) -> Path:
    script = directory / "hot.py"
    script.write_text(HOT_PY)
    return script


def load_fixture(name: str) -> tuple[dict[str, bytes], dict]:
    """Artifacts (file name = role) and expected.json of a checked-in fixture directory."""
    d = DATA / name
    expected = json.loads((d / "expected.json").read_text())
    arts = {p.name: p.read_bytes() for p in sorted(d.iterdir())
            if p.name not in ("expected.json", "README.md") and p.is_file()}
    return arts, expected


class AdapterContract:
    """Subclass as ``class TestX(AdapterContract)`` and set the class attributes below."""

    adapter_factory: type[Adapter]
    factory_kwargs: ClassVar[dict] = {}
    fixture: str                 # directory name under tests/data
    source_text: str = HOT_C     # the program the fixture and live capture profile
    source_file: str = "hot.c"
    hot_name: str = "hot_kernel"
    hot_signature: str = "double hot_kernel("

    # --- subclass hooks ------------------------------------------------------------------------
    def workload(self, tmp: Path) -> list[str]:
        """Build the program in ``tmp`` (the source root); return argv to run it there."""
        exe = build_hot_c(tmp)
        return [str(exe), "400"]

    # --- shared fixtures -----------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls) -> Adapter:
        return cls.adapter_factory(**cls.factory_kwargs)

    @pytest.fixture(scope="class")
    @classmethod
    def usability(cls, adapter) -> Usability:
        return adapter.probe()

    @pytest.fixture(scope="class")
    @classmethod
    def fixture_profile(cls, adapter) -> tuple[Profile, dict]:
        arts, expected = load_fixture(cls.fixture)
        return adapter.normalize(arts, expected["source_root"], "baseline"), expected

    @pytest.fixture(scope="class")
    @classmethod
    def live(cls, adapter, usability, tmp_path_factory) -> tuple[Profile, object, Path]:
        if not usability.usable:
            pytest.skip(f"{adapter.spec.name} unusable here: {usability.reason}")
        root = tmp_path_factory.mktemp(adapter.spec.name)
        argv = cls().workload(root)
        req = CaptureRequest(argv=argv, cwd=str(root), out_dir=str(root / "out"), timeout_s=120)
        cap = adapter.capture(req)
        prof = adapter.normalize(read_artifacts(cap), str(root), "baseline")
        return prof, cap, root

    # --- spec & probe --------------------------------------------------------------------------
    def test_spec_declares_known_metrics_and_granularities(self, adapter):
        spec: AdapterSpec = adapter.spec
        assert spec.measures and all(is_known(m) for m in spec.measures), spec.measures
        assert spec.granularity and set(spec.granularity) <= set(GRANULARITIES)
        assert spec.overhead_factor >= 1.0 and spec.setup_s >= 0
        assert spec.cost_s(2.0) == pytest.approx(spec.overhead_factor * 2.0 + spec.setup_s)

    def test_probe_reports_version_or_reason(self, usability):
        assert isinstance(usability, Usability)
        assert usability.reason
        if usability.usable:
            assert usability.version

    def test_missing_tool_is_unusable_with_reason(self, tmp_path):
        adapter = self.adapter_factory(tool_path=str(tmp_path / "no-such-tool"), **self.factory_kwargs)
        u = adapter.probe()
        assert not u.usable and "not found on PATH" in u.reason

    # --- normalization of the checked-in real output ------------------------------------------
    def test_fixture_top_operation(self, fixture_profile):
        prof, expected = fixture_profile
        top = prof.top_operations(1)[0]
        assert top.id == expected["top_operation"]
        assert top.file == self.source_file
        assert prof.primary_metric == expected["primary_metric"]

    def test_fixture_lines_point_into_hot_function(self, fixture_profile):
        prof, expected = fixture_profile
        self._check_hot_lines(prof, expected["top_operation"])

    def test_fixture_invariants(self, fixture_profile):
        prof, _ = fixture_profile
        self._check_invariants(prof)

    def test_fixture_expected_totals(self, fixture_profile):
        prof, expected = fixture_profile
        for m, v in expected["totals"].items():
            assert prof.totals[m] == pytest.approx(v, rel=1e-9), m

    def test_normalize_is_pure_and_canonical(self, adapter):
        arts, expected = load_fixture(self.fixture)
        a = encode_profile(adapter.normalize(arts, expected["source_root"], "baseline"))
        b = encode_profile(adapter.normalize(dict(reversed(list(arts.items()))),
                                             expected["source_root"], "baseline"))
        assert a == b
        assert encode_profile(decode_profile(a)) == a

    def test_other_source_root_keeps_no_files(self, adapter):
        arts, _ = load_fixture(self.fixture)
        prof = adapter.normalize(arts, "/nonexistent-root", "baseline")
        assert all(op.file is None for op in prof.operations) and not prof.lines

    # --- live capture ----------------------------------------------------------------------------
    def test_live_capture_finds_hot_function(self, live):
        prof, cap, _root = live
        top = prof.top_operations(1)[0]
        assert top.name == self.hot_name, [o.id for o in prof.top_operations(5)]
        assert top.file == self.source_file
        assert all(v > 0 for v in prof.totals.values()), prof.totals
        assert cap.tool_version and cap.wall_s > 0
        assert all(Path(p).exists() for p in cap.artifacts.values())
        self._check_hot_lines(prof, top.id)
        self._check_invariants(prof)

    def test_capture_of_failing_program_raises(self, adapter, usability, tmp_path):
        if not usability.usable:
            pytest.skip(f"{adapter.spec.name} unusable here: {usability.reason}")
        req = CaptureRequest(argv=self.failing_argv(tmp_path), cwd=str(tmp_path),
                             out_dir=str(tmp_path / "out"), timeout_s=60)
        with pytest.raises(CaptureError) as err:
            adapter.capture(req)
        assert "\n" not in str(err.value)

    def failing_argv(self, tmp: Path) -> list[str]:
        return [str(tmp / "does-not-exist")]

    # --- helpers ---------------------------------------------------------------------------------
    def _check_hot_lines(self, prof: Profile, op_id: str) -> None:
        first, last = def_range(self.source_text, self.hot_signature)
        op = prof.operation(op_id)
        assert op is not None and op.line_start is not None and op.line_end is not None
        assert first <= op.line_start <= op.line_end <= last, (op.line_start, op.line_end, first, last)
        lines = prof.lines_of(op_id)
        assert lines and all(first <= lc.line <= last and lc.file == self.source_file for lc in lines)
        top = max(lines, key=lambda lc: lc.self_metrics[prof.primary_metric])
        assert first < top.line < last  # inside the body, not on the signature

    def _check_invariants(self, prof: Profile) -> None:
        m = prof.primary_metric
        assert prof.version == 1 and prof.tool and prof.tool_version
        assert all(is_known(x) for x in prof.metrics)
        ids = [op.id for op in prof.operations]
        assert len(ids) == len(set(ids))
        for op in prof.operations:
            assert op.inclusive_metrics.get(m, 0) + 1e-9 >= op.self_metrics.get(m, 0), op.id
            assert op.inclusive_metrics.get(m, 0) <= prof.totals[m] * (1 + 1e-9), op.id
            if op.file is not None:
                assert not op.file.startswith("/") and ".." not in op.file.split("/")
        total_self = sum(op.self_metrics.get(m, 0.0) for op in prof.operations)
        assert total_self == pytest.approx(prof.totals[m], rel=1e-9)
        known = set(ids)
        assert all(e.caller in known and e.callee in known for e in prof.edges)
        assert all(lc.operation in known for lc in prof.lines)


# --- adapters.base itself ---------------------------------------------------------------------------

def test_relative_to_root_is_pure_string_logic():
    assert relative_to_root("/src/a/b.c", "/src") == "a/b.c"
    assert relative_to_root("/src/a/../b.c", "/src/") == "b.c"
    assert relative_to_root("/srcx/b.c", "/src") is None
    assert relative_to_root("b.c", "/src") is None
    assert relative_to_root("b.c", "/src", cwd="/src/sub") == "sub/b.c"
    assert relative_to_root("<frozen importlib._bootstrap>", "/") is None
    assert relative_to_root("??", "/src") is None


def test_a_build_of_a_moved_run_directory_keeps_its_files():
    # debug info names where the build was made; the run was copied elsewhere since
    built = "/tmp/a/20261202-051806-matmul-c/build/baseline/sub/matmul.c"
    assert relative_to_root(built, "/tmp/b/20261202-051806-matmul-c/build/baseline") == "sub/matmul.c"
    # renamed too (`mv runs/20261202-051806-matmul-c runs/mine`): the same build
    assert relative_to_root(built, "/tmp/b/mine/build/baseline") == "sub/matmul.c"
    # another target's build, a path with no run directory above build/, and a root outside pw's
    # layout are not it
    assert relative_to_root(built, "/tmp/b/20261202-051806-matmul-c/build/interchange") is None
    assert relative_to_root("/build/baseline/matmul.c", "/tmp/b/mine/build/baseline") is None
    assert relative_to_root("/x/proj/src/matmul.c", "/y/proj/src") is None


def test_run_tool_timeout_kills_whole_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    # A shell whose child (the grandchild) would outlive a plain kill of the shell.
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    start = time.monotonic()
    with pytest.raises(CaptureError, match="timed out after 0.5 s"):
        run_tool(["sh", "-c", script], timeout_s=0.5)
    assert time.monotonic() - start < 10
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


def test_run_tool_missing_binary_is_capture_error(tmp_path):
    with pytest.raises(CaptureError, match="cannot start"):
        run_tool([str(tmp_path / "nope")], timeout_s=5)


def test_run_tool_overlays_env():
    r = run_tool([sys.executable, "-c", "import os; print(os.environ['PW_X'], 'PATH' in os.environ)"],
                 timeout_s=10, env={"PW_X": "42"})
    assert r.stdout.split() == [b"42", b"True"]


def test_capture_request_and_spec_are_frozen_structs():
    req = CaptureRequest(argv=["a"], cwd="/", out_dir="/tmp/x")
    with pytest.raises(AttributeError):
        req.argv = ["b"]  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(req), type=CaptureRequest) == req
