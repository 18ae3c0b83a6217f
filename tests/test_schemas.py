"""The checked-in JSON Schemas are exactly what the msgspec types generate."""

from __future__ import annotations

import json

from pw.export.schemas import SCHEMA_DIR, generate

REGENERATE = "regenerate with `.venv/bin/python -m pw.export.schemas` and commit schemas/"


def test_checked_in_schemas_match_the_types():
    generated = generate()
    on_disk = {p.name: p.read_bytes() for p in SCHEMA_DIR.glob("*.schema.json")}
    missing = sorted(set(generated) - set(on_disk))
    extra = sorted(set(on_disk) - set(generated))
    differ = sorted(name for name in set(generated) & set(on_disk) if generated[name] != on_disk[name])
    problems = [f"{label}: {', '.join(names)}" for label, names in (
        ("missing", missing), ("no longer generated", extra), ("out of date", differ)) if names]
    assert not problems, "schemas/ drifted from the types (" + "; ".join(problems) + f"); {REGENERATE}"


def test_generation_is_deterministic_and_covers_every_event_type():
    from ledger.events import EVENT_TYPES

    first, second = generate(), generate()
    assert first == second
    for name, cls in EVENT_TYPES.items():
        assert f"event.{name}.v{cls.VERSION}.schema.json" in first
    for name in ("envelope.schema.json", "profileweaver.schema.json", "experiment-plan.schema.json"):
        schema = json.loads(first[name])
        assert "$ref" in schema or "properties" in schema
