"""The one retry policy of every HTTP client here: the deploy client (search/deployed.py), the web
search providers (websearch/), the embedding servers (embedders/remote.py) and the LLM
(llm/client.py). `tenacity` runs the loop, sync or async; this module says what is retried, how
often and how long to wait:

- a client raises `Retryable` for a failure a retry may fix (a timeout, a lost connection, or a
  status `retried_status` names: 408, 409, 429, 5xx), carrying the server's Retry-After if any;
  anything else it raises is not retried;
- at most `max_retries` retries; before retry n (0-based), the server's Retry-After (seconds,
  within `max_delay`) where it gave one, else base * 2^n capped at `max_delay`, plus up to half
  of that again as jitter, so parallel callers do not retry in step.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tenacity

OnRetry = Callable[[int, float, "Retryable"], None]  # (retry number from 1, seconds to wait, the failure)


def retried_status(status: int) -> bool:
    """Whether an HTTP status is worth a retry (the statuses the openai client retries too)."""
    return status in (408, 409, 429) or status >= 500


class Retryable(Exception):
    """A failure a retry may fix; `retry_after`: the server's Retry-After header, if it sent one."""

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0

    def delay(self, retry: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `retry` (0-based): base * 2^retry, capped, plus up
        to half of that again as jitter."""
        d = min(self.max_delay, self.base_delay * 2**retry)
        return d * (1 + 0.5 * rng())

    def after(self, retry: int, retry_after: str | None) -> float:
        """The wait before retry `retry`: the server's Retry-After (seconds) where it gave one,
        within `max_delay`; else `delay`."""
        if retry_after is not None:
            try:
                return min(self.max_delay, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: rare from these servers; back off as usual
        return self.delay(retry)

    def retrying(self, on_retry: OnRetry | None = None) -> tenacity.Retrying:
        """A tenacity loop to call a blocking function with: `self.retrying(note)(fn, *args)`.
        Its `statistics["attempt_number"]` says how many attempts the last call made."""
        return tenacity.Retrying(**self._options(on_retry))

    def async_retrying(self, on_retry: OnRetry | None = None) -> tenacity.AsyncRetrying:
        """The same for a coroutine function: `await self.async_retrying(note)(fn, *args)`; its
        waits are `asyncio.sleep`, so a cancelled task stops backing off at once."""
        return tenacity.AsyncRetrying(**self._options(on_retry))

    def _options(self, on_retry: OnRetry | None) -> dict[str, Any]:
        def wait(state: tenacity.RetryCallState) -> float:
            failure = state.outcome.exception() if state.outcome is not None else None
            return self.after(state.attempt_number - 1, getattr(failure, "retry_after", None))

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None:
                on_retry(state.attempt_number, state.upcoming_sleep, state.outcome.exception())  # type: ignore[arg-type]

        return {"stop": tenacity.stop_after_attempt(self.max_retries + 1), "wait": wait,
                "retry": tenacity.retry_if_exception_type(Retryable), "before_sleep": before_sleep, "reraise": True}
