"""Workload root discovery (pw.workload.root): when the build reaches outside the workload, the
nearest ancestor holding every referenced path is copied and steps run from the workload inside it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger.contract import Contract, Oracle, Source, Step
from ledger.errors import InputError
from pw.workload.inference import infer_contract
from pw.workload.manifest import check_contract, place_in_root
from pw.workload.root import MAX_LEVELS, discover_root, rebase

SUITE = Path(__file__).resolve().parents[1] / "workloads" / "suite"


@pytest.fixture
def suite(tmp_path) -> Path:
    dest = tmp_path / "suite"
    shutil.copytree(SUITE, dest)
    return dest


def test_a_suite_kernel_roots_at_the_suite_and_names_what_reached_outside(suite):
    d = discover_root(suite / "linear-algebra" / "gemm")
    assert Path(d.root) == suite.resolve() and d.workload_rel == "linear-algebra/gemm"
    kinds = {(r.kind, r.text) for r in d.references}
    assert {("make include", "../../config.mk"), ("-I", "../../utilities"),
            ("source path", "../../utilities/common.c")} <= kinds
    assert "no repository around it" in d.reason


def test_a_self_contained_workload_is_its_own_root():
    d = discover_root(SUITE.parent / "matmul-c")
    assert d.workload_rel == "." and not d.references


def test_a_variable_holding_the_path_and_a_cmake_parent_and_a_c_include_are_followed(tmp_path):
    (tmp_path / "proj" / "common").mkdir(parents=True)
    (tmp_path / "proj" / "common" / "x.h").write_text("int x;\n")
    app = tmp_path / "proj" / "apps" / "one"
    app.mkdir(parents=True)
    (app / "Makefile").write_text("TOP := ../..\nall:\n\tcc -I$(TOP)/common one.c\n")
    assert Path(discover_root(app).root) == (tmp_path / "proj").resolve()
    (app / "Makefile").unlink()
    (app / "CMakeLists.txt").write_text("add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/../../common common)\n")
    assert Path(discover_root(app).root) == (tmp_path / "proj").resolve()
    (app / "CMakeLists.txt").unlink()
    (app / "one.c").write_text('#include "../../common/x.h"\n')
    d = discover_root(app)
    assert Path(d.root) == (tmp_path / "proj").resolve() and d.references[0].kind == "#include"


def test_a_python_package_inside_a_parent_package_roots_above_the_top_package(tmp_path):
    sub = tmp_path / "repo" / "top" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "repo" / "top" / "__init__.py").write_text("")
    (sub / "__init__.py").write_text("from top import helpers\n")
    d = discover_root(sub)
    assert Path(d.root) == (tmp_path / "repo").resolve() and d.references[0].text == "top.sub"


def test_a_reference_beyond_the_bound_is_one_clear_error(tmp_path):
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(MAX_LEVELS + 2)])
    deep.mkdir(parents=True)
    (tmp_path / "shared.mk").write_text("X=1\n")
    up = "/".join([".."] * (MAX_LEVELS + 2))
    (deep / "Makefile").write_text(f"include {up}/shared.mk\n")
    with pytest.raises(InputError, match=r"outside every ancestor up to \d+ levels \(and never /\)"):
        discover_root(deep)


def test_the_inferred_suite_contract_builds_from_the_kernel_and_edits_only_its_own_files(suite):
    gemm = suite / "linear-algebra" / "gemm"
    (gemm / "vendored").mkdir()
    shutil.copy(suite / "utilities" / "common.h", gemm / "vendored" / "common.h")  # a vendored harness copy
    contract, decisions = infer_contract(gemm)
    assert contract.source.root == "../.."
    assert contract.source.editable == ["linear-algebra/gemm/gemm.c", "linear-algebra/gemm/gemm.h"]
    assert [s.cwd for s in contract.build] == ["linear-algebra/gemm"] and contract.run.cwd == "linear-algebra/gemm"
    assert contract.run.argv == ["./gemm"]
    assert decisions[0].startswith("root: the build reaches outside the workload: make include ../../config.mk")
    never = next(d for d in decisions if d.startswith("source: never editable"))
    assert "utilities" in never and "linear-algebra/gemm/vendored/common.h" in never
    before = sorted(p.relative_to(suite).as_posix() for p in suite.rglob("*"))
    assert not (gemm / "gemm").exists() and before == sorted(p.relative_to(suite).as_posix() for p in suite.rglob("*"))


def test_a_manifest_may_name_an_ancestor_and_is_rebased_onto_it(suite):
    gemm = suite / "linear-algebra" / "gemm"
    c = Contract(version=1, name="gemm", source=Source(editable=["gemm.c"], root="../.."),
                 build=[Step(argv=["make"])], run=Step(argv=["./gemm"]), oracle=Oracle(kind="stable"))
    check_contract(c, gemm, name="profileweaver.json")
    placed, lines = place_in_root(c, gemm)
    assert placed.source.editable == ["linear-algebra/gemm/gemm.c"] and placed.run.cwd == "linear-algebra/gemm"
    assert lines[0].startswith("root: source.root '../..' names")
    for bad in ("../../../../../../../../..", "../sibling", "/"):
        with pytest.raises(InputError, match="source.root: expected a path inside the workload or one of its"):
            check_contract(Contract(version=1, name="g", source=Source(editable=["gemm.c"], root=bad),
                                    run=Step(argv=["./gemm"])), gemm, name="profileweaver.json")


def test_a_manifest_at_the_default_root_gets_the_discovered_one(suite):
    gemm = suite / "linear-algebra" / "gemm"
    c = Contract(version=1, name="gemm", source=Source(editable=["gemm.c"]), build=[Step(argv=["make"])],
                 run=Step(argv=["./gemm"]))
    placed, lines = place_in_root(c, gemm)
    assert placed.source.root == "../.." and placed.build[0].cwd == "linear-algebra/gemm"
    assert lines and "nearest ancestor" in lines[0]


def test_rebase_is_the_identity_at_the_workload_itself():
    c = Contract(version=1, name="x", source=Source(editable=["*.c"]), run=Step(argv=["./x"]))
    assert rebase(c, ".") is c


def test_an_inferred_python_package_inside_a_parent_package_runs_with_the_root_on_its_path(tmp_path):
    import subprocess

    top = tmp_path / "repo" / "top"
    sub = top / "sub"
    sub.mkdir(parents=True)
    (top / "__init__.py").write_text("")
    (top / "helpers.py").write_text("def twice(x):\n    return 2 * x\n")
    (sub / "__init__.py").write_text("")
    (sub / "main.py").write_text("from top.helpers import twice\nprint(twice(21))\n")
    contract, decisions = infer_contract(sub)
    assert contract.source.root == "../.." and contract.run.cwd == "top/sub"
    assert contract.run.env == {"PYTHONPATH": "../.."} and "PYTHONPATH=../.., the root" in decisions[-5]
    assert contract.source.editable == ["top/sub/__init__.py", "top/sub/main.py"]
    # The step as pw runs it: from the workload directory inside the copied root.
    proc = subprocess.run(contract.run.argv, cwd=tmp_path / "repo" / contract.run.cwd, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", **contract.run.env}, timeout=30)
    assert proc.stdout == "42\n", proc.stderr
