"""Token-bucket arithmetic, with the clock as an argument (no clock, no I/O, no locks: one greenlet thread).

A bucket holds up to ``size`` tokens and gains ``rate`` tokens a second; a call takes one. It starts full, so a
client may make ``size`` calls at once, then ``rate`` a second.
"""

from __future__ import annotations


class Bucket:
    __slots__ = ("level", "stamp")

    def __init__(self, level: float, stamp: float) -> None:
        #: the tokens it held at ``stamp`` (a clock reading, in seconds)
        self.level = level
        self.stamp = stamp

    def refill(self, now: float, rate: float, size: float) -> float:
        """Add the tokens of the time since it was last refilled (up to ``size``); the tokens it holds now."""
        elapsed = now - self.stamp
        if elapsed > 0.0:
            level = self.level + elapsed * rate
            self.level = level if level < size else size
            self.stamp = now
        return self.level

    def wait(self, rate: float) -> float:
        """Seconds until it holds a whole token again (0 when it does)."""
        missing = 1.0 - self.level
        return missing / rate if missing > 0.0 else 0.0

    def full(self, now: float, rate: float, size: float) -> bool:
        """It would hold ``size`` tokens at ``now``: forgetting it changes nothing."""
        return self.level + (now - self.stamp) * rate >= size
