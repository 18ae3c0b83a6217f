"""Source locator: bounded, addressable source targets for a measured hotspot (DESIGN §12)."""

from pw.source.locator import locate
from pw.source.model import AccessFact, FrontierEntry, SourceTargets, Target

__all__ = ["AccessFact", "FrontierEntry", "SourceTargets", "Target", "locate"]
