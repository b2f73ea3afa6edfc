"""Console output that can never fail a run: the guarded streams of
``harness.streams``, re-exported for the commands (they sit below the engine,
whose progress bar writes through them too)."""

from harness.streams import GuardedStream, guarded, say

__all__ = ["GuardedStream", "guarded", "say"]
