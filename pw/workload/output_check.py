"""Every run's output is checked: timed and profiled runs against the oracle-checked output.

Only the oracle run used to be compared with a reference, so a program that could tell a timed
run from the oracle run could skip its work there and print anything. Now each timed run's stdout,
stderr and declared output file, and each profiled run's stdout (the profiler's own messages share
its stderr), must equal what the same target printed in its oracle-checked run. Where the oracle
states a tolerance (rtol or atol > 0), the program is declared nondeterministic-but-tolerant and a
stream passes when it matches within that tolerance. Lines of the region-of-interest metric are
left out (they carry the run's own time), and so are the lines the inferred oracle found varying
between identical baseline runs (``Expected.vary``: timers the program prints).

A stream the baseline itself does not reproduce between its oracle run and a timed run (a stderr
that prints a time stamp, say) cannot be an oracle for anyone: it is left unchecked for both arms
and named in the campaign's conditions (`unchecked_streams`), never silently.

Pure: texts and hashes in, findings out.
"""

from __future__ import annotations

import hashlib

import msgspec

from ledger.contract import Contract
from pw.workload.compare import compare_text, decode_streams, is_bundle


class Expected(msgspec.Struct, frozen=True):
    """A target's oracle-checked output (None where it was not recorded, e.g. an older run)."""

    stdout: str | None
    stderr: str | None
    output_file_sha256: str | None
    # Lines of stdout/stderr that vary run to run (timers), set aside by the inferred oracle at
    # `pw start` and kept in its bundle: no run is compared on them.
    vary: dict[str, list[int]] = {}


class Observed(msgspec.Struct, frozen=True):
    stdout: str
    stderr: str | None  # None: not comparable (a profiled run, where the profiler writes there too)
    output_file: bytes | None


STREAMS = ("stdout", "stderr", "output file")


def expected(oracle_output: bytes | None, oracle_stderr: bytes | None, output_file_sha256: str | None) -> Expected:
    """What an oracle-checked run printed, per stream, from what ``OracleChecked`` stored.

    An inferred oracle stores its checked output as a bundle of every stream (stdout, stderr, the
    files it created: ``compare.encode_streams``), other oracles the bare stdout. Each stream is
    compared with the same stream: the bundle's own text is nobody's stdout. ``oracle_stderr`` is
    the same run's stderr, stored on its own; the bundle's copy stands in where it was not stored.
    """
    stdout = oracle_output.decode(errors="replace") if oracle_output is not None else None
    stderr = oracle_stderr.decode(errors="replace") if oracle_stderr is not None else None
    vary: dict[str, list[int]] = {}
    if oracle_output is not None and is_bundle(oracle_output):
        bundle = decode_streams(oracle_output)
        stdout = bundle.stdout
        stderr = bundle.stderr if stderr is None else stderr
        vary = dict(bundle.vary)
    return Expected(stdout=stdout, stderr=stderr, output_file_sha256=output_file_sha256, vary=vary)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text_differs(contract: Contract, got: str, want: str, vary: list[int] = ()) -> str | None:  # type: ignore[assignment]
    o = contract.oracle
    skip = contract.metric.region_pattern
    if skip is None and got == want:
        return None
    if o.rtol > 0 or o.atol > 0 or skip is not None or vary:
        cmp = compare_text(got, want, rtol=o.rtol, atol=o.atol, skip_pattern=skip, vary=vary)
        return None if cmp.passed else cmp.detail
    cmp = compare_text(got, want, rtol=0.0, atol=0.0)
    return cmp.detail if not cmp.passed else "the bytes differ (whitespace or line endings)"


def differences(contract: Contract, run: Observed, expected: Expected, skip: frozenset[str] = frozenset()
                ) -> list[tuple[str, str]]:
    """(stream, detail) for every stream of ``run`` that differs from ``expected``; streams in
    ``skip`` or without a recorded expectation are not compared."""
    out: list[tuple[str, str]] = []
    if "stdout" not in skip and expected.stdout is not None:
        detail = _text_differs(contract, run.stdout, expected.stdout, expected.vary.get("stdout", []))
        if detail is not None:
            out.append(("stdout", detail))
    if "stderr" not in skip and expected.stderr is not None and run.stderr is not None:
        detail = _text_differs(contract, run.stderr, expected.stderr, expected.vary.get("stderr", []))
        if detail is not None:
            out.append(("stderr", detail))
    if "output file" not in skip and expected.output_file_sha256 is not None:
        if run.output_file is None:
            out.append(("output file", f"the run did not write {contract.oracle.path}"))
        elif sha256(run.output_file) != expected.output_file_sha256:
            out.append(("output file", f"{contract.oracle.path} differs (sha256 {sha256(run.output_file)[:12]} "
                                       f"vs {expected.output_file_sha256[:12]})"))
    return out
