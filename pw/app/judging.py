"""The shell around the pure judge: load the evidence it reads, then judge.

`pw/rules/judge.py` decides from events and bytes handed to it; this module is where those bytes
come from (the run's content-addressed evidence store), for evaluate, confirm and audit alike.
"""

from __future__ import annotations

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.rules import gates
from pw.rules.judge import Judgement, judge_events, profiles_needed


def judge_recorded(envelopes: list[ev.Envelope], cid: str, evidence: EvidenceStore,
                   rules: int = gates.GATE_RULES) -> Judgement:
    profiles = {sha: evidence.get(sha) for sha in profiles_needed(envelopes, cid)}
    return judge_events(envelopes, cid, profiles, rules)


def judge_candidate(handle, cid: str) -> list[ev.Payload]:
    """The judgement batch for the candidate's latest attempt; its profile diff kept as evidence
    (the projections copy it to candidates/<id>/profile/profile-diff.json)."""
    j = judge_recorded(handle.events(), cid, handle.evidence)
    if j.profile_diff is not None:
        handle.evidence.put(j.profile_diff)
    return [j.evaluated, j.gates, j.verdict]
