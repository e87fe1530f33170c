"""The one retry policy of the HTTP clients (retriever/retry.py, tenacity underneath): what is
retried, how many times, and how long it waits (the server's Retry-After first). The clients'
own tests drive it over real HTTP: test_deploy.py, test_websearch.py, test_embedding_faults.py,
test_llm.py."""

from __future__ import annotations

import asyncio

import pytest
from retriever.retry import Retryable, RetryPolicy, retried_status


class Script:
    """Raises the given failures in turn, then returns "ok"; records each attempt and each wait."""

    def __init__(self, *failures: Exception) -> None:
        self.failures, self.attempts, self.waits = list(failures), 0, []

    def __call__(self) -> str:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"

    async def coroutine(self) -> str:
        return self()

    def note(self, retry: int, wait: float, e: Retryable) -> None:
        self.waits.append((retry, round(wait, 3), str(e)))


@pytest.mark.parametrize(("status", "retried"), [
    (408, True), (409, True), (429, True), (500, True), (503, True), (599, True),
    (400, False), (401, False), (403, False), (404, False), (422, False),
])
def test_which_statuses_are_retried(status: int, retried: bool) -> None:
    assert retried_status(status) is retried


def test_retries_until_it_answers_waiting_as_retry_after_says_within_max_delay() -> None:
    script = Script(Retryable("503", retry_after="0.01"), Retryable("429", retry_after="99"),
                    Retryable("502", retry_after="Wed, 21 Oct 2026 07:28:00 GMT"))
    policy = RetryPolicy(max_retries=3, base_delay=0.02, max_delay=0.05)
    assert policy.retrying(script.note)(script) == "ok"
    assert script.attempts == 4
    (r1, w1, m1), (r2, w2, _), (r3, w3, _) = script.waits
    assert (r1, w1, m1) == (1, 0.01, "503")  # the server's Retry-After
    assert (r2, w2) == (2, 0.05)  # ... within max_delay
    assert r3 == 3 and 0.05 <= w3 <= 0.05 * 1.5  # a date: backoff (0.02 * 2^2, capped at 0.05, plus jitter)


def test_gives_up_after_max_retries_with_the_last_failure() -> None:
    script = Script(*(Retryable(f"HTTP 500 #{i}", retry_after="0") for i in range(9)))
    retrying = RetryPolicy(max_retries=2).retrying(script.note)
    with pytest.raises(Retryable, match="HTTP 500 #2"):
        retrying(script)
    assert script.attempts == 3 and [r for r, _, _ in script.waits] == [1, 2]
    assert retrying.statistics["attempt_number"] == 3


def test_anything_else_is_raised_at_once() -> None:
    script = Script(Retryable("503", retry_after="0"), ValueError("HTTP 400"))
    with pytest.raises(ValueError, match="HTTP 400"):
        RetryPolicy(max_retries=5).retrying(script.note)(script)
    assert script.attempts == 2


def test_async_retries_the_same_way() -> None:
    script = Script(Retryable("timed out", retry_after="0"), Retryable("timed out", retry_after="0"))
    assert asyncio.run(RetryPolicy(max_retries=2).async_retrying(script.note)(script.coroutine)) == "ok"
    assert script.attempts == 3 and len(script.waits) == 2
    script = Script(Retryable("timed out", retry_after="0"))
    with pytest.raises(Retryable):
        asyncio.run(RetryPolicy(max_retries=0).async_retrying(script.note)(script.coroutine))
    assert script.attempts == 1 and script.waits == []
