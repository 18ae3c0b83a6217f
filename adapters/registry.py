"""The installed adapters: the one source of truth for what ProfileWeaver can profile with.

``adapters/registry.json`` is generated from this list (``python -m adapters.registry``) and checked
in; a test fails when the two drift. Routing reads specs from here, never from the JSON.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from adapters.base import Adapter, AdapterSpec
from adapters.callgrind import CallgrindAdapter
from adapters.cupti import CuptiAdapter
from adapters.drgpum import DrgpumAdapter
from adapters.gpa import GpaAdapter
from adapters.gvprof import GvprofAdapter
from adapters.hpctoolkit import HpctoolkitAdapter
from adapters.ncu import NcuAdapter
from adapters.nsys import NsysAdapter
from adapters.perf import PerfAdapter
from adapters.pyspy import PySpyAdapter
from ledger.metrics import metric

REGISTRY_VERSION = 1
REGISTRY_PATH = Path(__file__).with_name("registry.json")


def installed_adapters() -> list[Adapter]:
    """A fresh instance of every installed adapter (tools looked up on PATH), sorted by name."""
    adapters: list[Adapter] = [PerfAdapter(), CallgrindAdapter(), CallgrindAdapter(cache_sim=True),
                               PySpyAdapter(), CuptiAdapter(), NsysAdapter(), NcuAdapter(),
                               # partial: they import pre-captured artifacts (`pw import`), never capture
                               HpctoolkitAdapter(), GvprofAdapter(), DrgpumAdapter(), GpaAdapter()]
    return sorted(adapters, key=lambda a: a.spec.name)


def installed_specs() -> list[AdapterSpec]:
    return [a.spec for a in installed_adapters()]


def partial_adapters() -> list:
    """The installed adapters that only import pre-captured artifacts (``adapters.partial``)."""
    from adapters.partial import PartialAdapter

    return [a for a in installed_adapters() if isinstance(a, PartialAdapter)]


def adapter_by_name(name: str) -> Adapter:
    for a in installed_adapters():
        if a.spec.name == name:
            return a
    raise KeyError(f"unknown adapter {name!r}; expected one of {[s.name for s in installed_specs()]}")


def registry_document() -> dict:
    """The registry as plain data: every spec plus the unit of each metric it measures."""
    specs = installed_specs()
    metric_ids = sorted({m for s in specs for m in s.measures})
    return {
        "version": REGISTRY_VERSION,
        "adapters": [msgspec.to_builtins(s) for s in specs],
        "metrics": {m: msgspec.to_builtins(metric(m)) for m in metric_ids},
    }


def render_registry() -> bytes:
    """Canonical bytes of ``registry.json`` (sorted keys, 2-space indent, trailing newline)."""
    compact = msgspec.json.encode(registry_document(), order="sorted")
    return msgspec.json.format(compact, indent=2) + b"\n"


def write_registry(path: Path = REGISTRY_PATH) -> Path:
    """Write the generated registry to ``path`` (default: adapters/registry.json)."""
    path.write_bytes(render_registry())
    return path


if __name__ == "__main__":
    write_registry()
