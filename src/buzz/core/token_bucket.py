"""A token bucket, the clock given by the caller (no I/O): `rate` tokens a second, at most
`burst` held, full at the start. The huddle relay meters each seat's inbound audio frames with
one (issue 24 item 15, docs/limits.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TokenBucket:
    rate: float  # tokens added per second
    burst: float  # the most it holds (and what it starts with)
    tokens: float
    stamp: float  # the clock reading of the last `take`

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> TokenBucket:
        return cls(rate, burst, burst, now)

    def take(self, now: float) -> bool:
        """Spend one token at clock reading `now`; False (nothing spent) when none is left."""
        tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if tokens < 1.0:
            self.tokens = tokens
            return False
        self.tokens = tokens - 1.0
        return True

    def wait(self) -> float:
        """Seconds from the last `take` until a token is there."""
        return max(0.0, (1.0 - self.tokens) / self.rate)
