"""How long to wait before retrying a request that failed in a way a retry may fix."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0

    def delay(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (0-based): base * 2^retry, capped, plus up
        to half of that again as jitter, so parallel callers do not retry in step."""
        d = min(self.max_delay, self.base_delay * 2**retry)
        return d * (1 + 0.5 * rng())

    def after(self, retry: int, retry_after: str | None) -> float:
        """The wait before retry `retry`: the server's Retry-After (seconds) where it gave one,
        within `max_delay`; else `delay`."""
        if retry_after is not None:
            try:
                return min(self.max_delay, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: rare from a retriever; back off as usual
        return self.delay(retry)
