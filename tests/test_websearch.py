"""Web search: each provider's real client library (exa-py, tavily-python, httpx) against a local
server that speaks its wire format (retriever.testing.fake_web); the runner on its own; the MCP tools."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import MCP
from retriever import Retriever
from retriever.config import Config, validate_config
from retriever.errors import ConfigError
from retriever.testing.fake_web import FakeProvider, hit, start, stop
from retriever.websearch import QueryResult, RetryPolicy, WebHit, WebsearchAuthError, web_search
from retriever.websearch.base import QueryError, TransientError, run_queries

KEY = "sk-test-SECRET-7f3a9c"
ENV = {"exa": "EXA_API_KEY", "tavily": "TAVILY_API_KEY", "zhipuai": "ZHIPUAI_API_KEY"}


@pytest.fixture(params=["exa", "tavily", "zhipuai"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeProvider]:
    server = start(FakeProvider(request.param, KEY))
    yield server
    stop(server)


@pytest.fixture
def tavily() -> Iterator[FakeProvider]:
    server = start(FakeProvider("tavily", KEY))
    yield server
    stop(server)


def config_for(fake: FakeProvider, **options: Any) -> Config:
    section = {"api_key": KEY, "base_url": fake.base_url, "timeout": 2, "max_retries": 2, "base_delay": 0.01}
    section.update(options)
    return validate_config({"websearch_backend": fake.provider,
                            "websearch_backend_configs": {fake.provider: section}}, source="test")


def search(fake: FakeProvider, queries: list[str], top_k: int = 3, threads: int = 1,
           **options: Any) -> list[QueryResult]:
    return asyncio.run(web_search(config_for(fake, **options), fake.provider, queries, top_k, threads))


def expected(fake: FakeProvider, query: str, n: int) -> list[WebHit]:
    return [WebHit(text=h["text"], url=h["url"], title=h["title"],
                   score=None if fake.provider == "zhipuai" else h["score"])
            for h in (hit(query, i) for i in range(n))]


# ---- each provider through its real client ---------------------------------------------------


def test_results_are_mapped_per_query(fake: FakeProvider) -> None:
    results = search(fake, ["ocean tides", "moon phases"], top_k=3)
    assert [list(r.hits) for r in results] == [expected(fake, "ocean tides", 3), expected(fake, "moon phases", 3)]
    assert [r.error for r in results] == [None, None]


EXPECTED_REQUEST = {
    "exa": ("/search", "x-api-key", KEY,
            {"query": "ocean tides", "numResults": 4, "type": "auto", "contents": {"text": {"maxCharacters": 3000}}}),
    "tavily": ("/search", "authorization", f"Bearer {KEY}",
               {"query": "ocean tides", "max_results": 4, "search_depth": "basic", "topic": "general"}),
    "zhipuai": ("/api/paas/v4/web_search", "authorization", f"Bearer {KEY}",
                {"search_query": "ocean tides", "search_engine": "search_std", "search_intent": False, "count": 4,
                 "search_recency_filter": "noLimit", "content_size": "medium"}),
}


def test_the_client_sends_the_provider_wire_format(fake: FakeProvider) -> None:
    search(fake, ["ocean tides"], top_k=4)
    path, header, value, body = EXPECTED_REQUEST[fake.provider]
    (request,) = fake.requests
    assert request.path == path
    assert request.headers[header] == value
    assert request.headers["content-type"].startswith("application/json")
    assert request.body == body


def test_provider_options_from_the_config_reach_the_request(fake: FakeProvider) -> None:
    options = {"exa": {"search_type": "neural", "max_characters": 500, "category": "news"},
               "tavily": {"search_depth": "advanced", "topic": "news"},
               "zhipuai": {"search_engine": "search_pro", "search_intent": True, "search_recency_filter": "oneWeek",
                           "content_size": "high"}}[fake.provider]
    search(fake, ["ocean tides"], **options)
    body = fake.requests[0].body
    wire = {"search_type": "type", "max_characters": None}
    for key, value in options.items():
        if key == "max_characters":
            assert body["contents"]["text"]["maxCharacters"] == value
        else:
            assert body[wire.get(key) or key] == value


def test_top_k_is_asked_for_and_enforced(fake: FakeProvider) -> None:
    fake.extra = 4  # the server returns 4 more than asked
    (result,) = search(fake, ["ocean tides"], top_k=2)
    assert fake.requests[0].body[{"exa": "numResults", "tavily": "max_results", "zhipuai": "count"}[fake.provider]] == 2
    assert list(result.hits) == expected(fake, "ocean tides", 2)


@pytest.mark.parametrize("threads", [1, 3])
def test_concurrency_is_bounded_by_retrieve_thread_num(fake: FakeProvider, threads: int) -> None:
    fake.delay = 0.1
    queries = [f"query {i}" for i in range(6)]
    results = search(fake, queries, top_k=1, threads=threads)
    assert fake.max_in_flight == threads
    assert [r.hits[0].title for r in results] == [f"{q} title 0" for q in queries]  # in query order


def test_429_is_retried_with_exponential_backoff(fake: FakeProvider) -> None:
    fake.plan["busy"] = [429, 429, 200]
    (result,) = search(fake, ["busy"], base_delay=0.05, max_retries=3)
    assert result.error is None and list(result.hits) == expected(fake, "busy", 3)
    t = fake.times("busy")
    assert len(t) == 3
    assert t[1] - t[0] >= 0.05 and t[2] - t[1] >= 0.10  # base, then twice base (jitter only adds)


def test_a_retry_waits_as_retry_after_says(fake: FakeProvider) -> None:
    """A 503 with Retry-After: 0.4 is retried after 0.4 s, not the policy's 0.01 .. 0.015 s; exa-py's
    errors carry no headers, so exa backs off as usual."""
    fake.plan["busy"], fake.retry_after = [503, 200], "0.4"
    (result,) = search(fake, ["busy"], base_delay=0.01, max_retries=1)
    assert result.error is None and list(result.hits) == expected(fake, "busy", 3)
    first, second = fake.times("busy")
    if fake.provider == "exa":
        assert second - first < 0.3
    else:
        assert 0.38 <= second - first < 2, second - first


def test_a_query_that_keeps_failing_gets_an_error_while_the_others_keep_their_hits(fake: FakeProvider) -> None:
    fake.plan["broken"] = [500]  # forever
    results = search(fake, ["fine one", "broken", "fine two"], threads=2, max_retries=2)
    assert list(results[0].hits) == expected(fake, "fine one", 3)
    assert list(results[2].hits) == expected(fake, "fine two", 3)
    assert results[1].hits == ()
    assert "HTTP 500" in results[1].error and "3 attempts" in results[1].error
    assert results[0].error is None and results[2].error is None
    assert len(fake.times("broken")) == 3  # the first try and max_retries retries


def test_a_request_that_times_out_is_retried_then_reported(fake: FakeProvider) -> None:
    fake.slow["stuck"] = 1.5
    results = search(fake, ["stuck", "quick"], threads=2, timeout=0.3, max_retries=1)
    assert results[0].hits == () and "timed out after 0.3 s" in results[0].error
    assert len(fake.times("stuck")) == 2
    assert results[1].error is None and len(results[1].hits) == 3


def test_a_refused_query_is_not_retried(fake: FakeProvider) -> None:
    fake.plan["bad request"] = [400]
    results = search(fake, ["bad request", "good"])
    assert "HTTP 400" in results[0].error and results[1].error is None
    assert len(fake.times("bad request")) == 1


@pytest.mark.parametrize("body", [
    pytest.param(b"<html>502 bad gateway</html>", id="not-json"),
    pytest.param(json.dumps({"results": "nope", "search_result": "nope"}).encode(), id="wrong-shape"),
    pytest.param(b"[1, 2]", id="not-an-object"),
])
def test_a_malformed_response_is_that_query_error(fake: FakeProvider, body: bytes) -> None:
    fake.raw["garbled"] = body
    results = search(fake, ["garbled", "good"])
    assert results[0].hits == () and "malformed response" in results[0].error
    assert len(fake.times("garbled")) == 1
    assert results[1].error is None and len(results[1].hits) == 3


def test_a_rejected_key_fails_the_whole_call_naming_the_variable(fake: FakeProvider) -> None:
    wrong = "sk-wrong-key-551"
    with pytest.raises(WebsearchAuthError) as err:
        search(fake, ["a", "b", "c"], api_key=wrong)
    assert ENV[fake.provider] in str(err.value) and "HTTP 401" in str(err.value)
    assert wrong not in str(err.value)


def test_a_missing_key_names_the_variable_and_the_env_key_is_used(fake: FakeProvider,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV[fake.provider], raising=False)
    with pytest.raises(WebsearchAuthError, match=ENV[fake.provider]):
        search(fake, ["a"], api_key=None)
    assert fake.requests == []  # failed before any request
    monkeypatch.setenv(ENV[fake.provider], KEY)
    (result,) = search(fake, ["a"], api_key=None)
    assert result.error is None and len(result.hits) == 3


def test_the_key_appears_in_no_error_log_or_result(fake: FakeProvider, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.echo_key = True  # the server quotes the key in its error bodies
    fake.plan["busy"] = [429]
    fake.plan["broken"] = [400]
    fake.raw["garbled"] = b"<html>oops</html>"
    results = search(fake, ["busy", "broken", "garbled", "fine"], threads=2)
    assert all(r.error for r in results[:3]) and results[3].error is None
    with pytest.raises(WebsearchAuthError) as err:
        search(fake, ["a"], api_key="sk-wrong-key-551")
    seen = repr(results) + str(err.value) + caplog.text + repr(config_for(fake))
    assert KEY not in seen and "sk-wrong-key-551" not in seen
    assert "***" in results[0].error  # the echoed key was redacted, not dropped silently


# ---- the runner on its own -------------------------------------------------------------------


class Scripted:
    """An in-process provider: per query, a list of outcomes (an exception to raise, or hits)."""

    provider = "scripted"

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.calls: list[str] = []

    async def search(self, query: str, top_k: int) -> list[WebHit]:
        self.calls.append(query)
        await asyncio.sleep(0)
        outcome = self.script[query].pop(0) if len(self.script[query]) > 1 else self.script[query][0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def aclose(self) -> None:
        pass


def run(searcher: Scripted, queries: list[str], retries: int = 2) -> list[QueryResult]:
    return asyncio.run(run_queries(searcher, queries, 5, 2, RetryPolicy(retries, 0.001)))


def test_runner_retries_transient_errors_only() -> None:
    ok = [WebHit("text")]
    s = Scripted({"t": [TransientError("HTTP 503"), ok], "q": [QueryError("HTTP 400")], "x": [RuntimeError("bug")]})
    results = run(s, ["t", "q", "x"])
    assert results[0] == QueryResult((WebHit("text"),))
    assert results[1] == QueryResult(error="scripted: HTTP 400")
    assert results[2] == QueryResult(error="scripted: unexpected RuntimeError: bug")
    assert s.calls.count("t") == 2 and s.calls.count("q") == 1 and s.calls.count("x") == 1


def test_runner_raises_an_auth_error_and_cancels_the_rest() -> None:
    s = Scripted({"a": [WebsearchAuthError("set EXA_API_KEY")], "b": [TransientError("HTTP 500")]})
    with pytest.raises(WebsearchAuthError, match="EXA_API_KEY"):
        asyncio.run(run_queries(s, ["a", "b"], 5, 2, RetryPolicy(5, 0.5)))
    assert s.calls.count("b") <= 1  # cancelled during its first backoff, not retried for seconds


def test_runner_cuts_a_long_reply_to_top_k() -> None:
    s = Scripted({"a": [[WebHit(str(i)) for i in range(9)]]})
    (result,) = asyncio.run(run_queries(s, ["a"], 4, 1, RetryPolicy()))
    assert [h.text for h in result.hits] == ["0", "1", "2", "3"]


@pytest.mark.parametrize(("retry", "rng", "expected"), [
    pytest.param(0, 0.0, 0.1, id="first-no-jitter"),
    pytest.param(2, 0.0, 0.4, id="doubles"),
    pytest.param(2, 1.0, 0.6, id="jitter-adds-half"),
    pytest.param(20, 0.0, 30.0, id="capped"),
])
def test_backoff_delay(retry: int, rng: float, expected: float) -> None:
    assert RetryPolicy(3, 0.1).delay(retry, rng=lambda: rng) == pytest.approx(expected)


# ---- config ----------------------------------------------------------------------------------


def test_config_sections_are_typed() -> None:
    with pytest.raises(ConfigError, match="unknown key 'websearch_backend_configs.tavily.max_result'"):
        validate_config({"websearch_backend_configs": {"tavily": {"max_result": 3}}}, source="x")
    with pytest.raises(ConfigError, match="websearch_backend"):
        validate_config({"websearch_backend": "bing"}, source="x")
    assert validate_config({"websearch_backend_configs": None}, source="x").websearch_backend_configs.exa.timeout == 30


def test_a_bad_key_value_is_not_echoed_in_the_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        validate_config({"websearch_backend_configs": {"exa": {"api_key": ["sk-list-key-9"]}}}, source="x")
    assert "api_key" in str(err.value) and "sk-list-key-9" not in str(err.value)


# ---- the MCP tools (no retriever_init needed) ---------------------------------------------------


def test_mcp_provider_tool_reply_shape(tavily: FakeProvider) -> None:
    tavily.plan["broken"] = [500]
    out = MCP(Retriever(config_for(tavily))).ok("retriever_tavily_search",
                                                {"query_list": ["tides", "broken"], "top_k": 2})
    assert set(out) == {"ret_psg", "ret_urls", "ret_titles", "ret_scores", "errors"}
    assert out["ret_psg"] == [["tides passage 0", "tides passage 1"], []]
    assert out["ret_urls"][0] == ["https://example.org/tides/0", "https://example.org/tides/1"]
    assert out["ret_titles"][0] == ["tides title 0", "tides title 1"]
    assert out["ret_scores"] == [[0.9, 0.8], []]
    assert out["errors"][0] is None and "HTTP 500" in out["errors"][1]


def test_mcp_websearch_uses_the_configured_backend_and_thread_num(tavily: FakeProvider) -> None:
    tavily.delay = 0.05
    cfg = config_for(tavily).with_overrides({"retrieve_thread_num": 2, "top_k": 1})
    out = MCP(Retriever(cfg)).ok("retriever_websearch", {"query_list": ["a", "b", "c", "d"]})
    assert out["ret_psg"] == [["a passage 0"], ["b passage 0"], ["c passage 0"], ["d passage 0"]]
    assert tavily.max_in_flight == 2


def test_mcp_websearch_batch_keeps_the_groups(tavily: FakeProvider) -> None:
    out = MCP(Retriever(config_for(tavily))).ok(
        "retriever_batch_websearch", {"batch_query_list": [["a", "b"], "c"], "top_k": 1, "websearch_backend": "tavily"})
    assert set(out) == {"ret_psg_ls", "ret_urls_ls", "ret_titles_ls", "ret_scores_ls", "errors_ls"}
    assert out["ret_psg_ls"] == [[["a passage 0"], ["b passage 0"]], [["c passage 0"]]]
    assert out["errors_ls"] == [[None, None], [None]]


def test_mcp_errors_name_what_to_do(tavily: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    mcp = MCP(Retriever(Config()))
    text = mcp.error("retriever_websearch", {"query_list": "a"})
    assert "cannot work with this server's configuration" in text and "websearch_backend" in text
    monkeypatch.delenv("EXA_API_KEY", raising=False)
    assert "EXA_API_KEY" in mcp.error("retriever_exa_search", {"query_list": "a"})
    bad = MCP(Retriever(config_for(tavily, api_key="sk-wrong-key-551")))
    text = bad.error("retriever_tavily_search", {"query_list": ["a"], "retrieve_thread_num": 2})
    assert "TAVILY_API_KEY" in text and "sk-wrong-key-551" not in text
    assert "top_k: Input should be greater than or equal to 1" in bad.error("retriever_tavily_search", {"query_list": ["a"], "top_k": 0})
