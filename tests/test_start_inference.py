"""Contract inference for workloads without profileweaver.json: conservative, no invented arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InputError
from pw.workload.inference import infer_contract

HELLO_C = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_lone_c_file(tmp_path):
    contract, decisions = infer_contract(write(tmp_path, {"hello.c": HELLO_C}))
    assert contract.build[0].argv[-3:] == ["hello", "hello.c", "-lm"]
    assert contract.run.argv == ["./hello"]  # no invented arguments
    assert contract.oracle.kind == "stable"
    assert any(d.startswith("oracle: inferred") for d in decisions)


def test_explicit_phony_run_target_is_used(tmp_path):
    write(tmp_path, {"hello.c": HELLO_C,
                     "Makefile": "hello: hello.c\n\tcc -o hello hello.c\n.PHONY: run\nrun: hello\n\t./hello\n"})
    contract, _ = infer_contract(tmp_path)
    assert contract.run.argv == ["make", "-s", "run"]


@pytest.mark.parametrize("extra", [{"run.sh": "#!/bin/sh\n./hello\n"}, {"run/README": "a directory called run\n"}])
def test_no_run_target_means_the_built_executable(tmp_path, extra):
    """A built-in rule (run.sh -> run) or a file/directory named `run` is not a `run` target."""
    write(tmp_path, {"hello.c": HELLO_C, "Makefile": "hello: hello.c\n\tcc -o hello hello.c\n", **extra})
    contract, decisions = infer_contract(tmp_path)
    assert contract.run.argv == ["./hello"], decisions


def test_several_executables_ask_for_a_manifest(tmp_path):
    write(tmp_path, {"a.c": HELLO_C, "b.c": HELLO_C,
                     "Makefile": "all: a b\na: a.c\n\tcc -o a a.c\nb: b.c\n\tcc -o b b.c\n"})
    with pytest.raises(InputError, match="several executables"):
        infer_contract(tmp_path)


def test_failing_trial_build_is_one_line(tmp_path):
    write(tmp_path, {"hello.c": "int main(void) { return 0 }\n", "Makefile": "hello: hello.c\n\tcc -o hello hello.c\n"})
    with pytest.raises(InputError, match="inferred build step") as info:
        infer_contract(tmp_path)
    assert "\n" not in info.value.message


def test_python_entry_point(tmp_path):
    write(tmp_path, {"main.py": "print(1)\n", "helper.py": "X = 1\n"})
    contract, _ = infer_contract(tmp_path)
    assert contract.run.argv == ["python3", "main.py"] and contract.build == []
