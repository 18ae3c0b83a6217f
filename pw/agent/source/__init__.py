"""Source locator: bounded, addressable source targets for a measured hotspot (DESIGN §12)."""

from pw.agent.source.locator import locate
from pw.agent.source.model import AccessFact, FrontierEntry, SourceTargets, Target

__all__ = ["AccessFact", "FrontierEntry", "SourceTargets", "Target", "locate"]
