"""The framework retrievers over an MCP server (`from_mcp`, integrations/over_mcp.py McpServer): a real
`retriever serve --transport http` with a bearer token on 127.0.0.1, searched by the official MCP
SDK's client through each framework's own pipeline object, sync and async. Their hits equal what
`from_yaml` (the library in process) gives for the same queries: ids, order, metadata, and scores to
the 4 decimals the agent's `search` sends.

Sessions are counted on the wire, outside both processes: the server is reached through a TCP relay
(`Relay`) that keeps the bytes clients send, and counts the `initialize` requests (one per MCP
session: the client uses the 2025-11-25 handshake, whose session the server keeps) and the
`tools/call` requests. So "one session for several calls" is what the relay saw, not what the
client says of itself (its `sessions` counter is checked beside it)."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from haystack import Pipeline
from retriever.errors import InvalidInputError, RemoteError
from retriever.integrations import haystack as hs
from retriever.integrations import langchain as lc
from retriever.integrations import llamaindex as li
from retriever.integrations.core import SearchOptions
from retriever.integrations.over_mcp import McpServer
from retriever.testing.net import free_port
from test_http_hardening import TOKEN_A, Server
from test_integrations import (
    HAYSTACK,
    QUERIES,
    Ranked,
    haystack_pipeline,
    haystack_run,
    langchain_chain,
    llamaindex_query_engine,
)

K = 5
SCORES = 5e-5 + 1e-9  # the agent's `search` rounds scores to 4 decimals (api/agent.py `_hit`)


class Relay:
    """A TCP relay to `port` on 127.0.0.1 that keeps, per connection, what the clients sent (its
    Host header names the server's port, which the server's Host check asks for)."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.sent: list[bytearray] = []
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, "127.0.0.1", 0), self.loop).result(10)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        kept = bytearray()
        with self.lock:
            self.sent.append(kept)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, keep: bytearray | None) -> None:
            try:
                while data := await source.read(65536):
                    if keep is not None:
                        with self.lock:
                            keep += data
                        data = re.sub(rb"(?i)(\r\nhost:\s*127\.0\.0\.1:)\d+", rb"\g<1>%d" % self.upstream, data)
                    sink.write(data)
                    await sink.drain()
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer, kept), pipe(up_reader, writer, None), return_exceptions=True)

    def count(self, pattern: bytes) -> int:
        with self.lock:
            return sum(len(re.findall(pattern, bytes(b))) for b in self.sent)

    @property
    def sessions(self) -> int:
        """MCP handshakes sent: `initialize` requests (not notifications/initialized)."""
        return self.count(rb'"method":\s*"initialize"')

    @property
    def calls(self) -> int:
        return self.count(rb'"method":\s*"tools/call"')

    @property
    def deletes(self) -> int:
        return self.count(rb"(?m)^DELETE /mcp ")

    def session_ids(self) -> set[bytes]:
        with self.lock:
            return {m for b in self.sent for m in re.findall(rb"(?im)^mcp-session-id:\s*(\S+)", bytes(b))}

    def stop(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server("serve", built_project, tmp_path_factory.mktemp("mcp-integrations"))
    yield s
    s.stop()  # and the tokens are not in its log


@pytest.fixture
def relay(server: Server) -> Iterator[Relay]:
    r = Relay(server.port)
    yield r
    r.stop()


def same(got: Ranked, want: Ranked) -> None:
    assert [[i for i, _ in row] for row in got] == [[i for i, _ in row] for row in want]
    for g, w in zip(got, want):
        assert [s for _, s in g] == pytest.approx([s for _, s in w], abs=SCORES)


# ---- each framework: sync and async, one session -----------------------------------------------


def llamaindex_async(retriever: li.Retriever, queries: list[str]) -> Ranked:
    async def run() -> Ranked:
        found = await asyncio.gather(*(retriever.aretrieve(q) for q in queries))  # concurrent, on one session
        return [[(n.node.node_id, n.score) for n in nodes] for nodes in found]

    return asyncio.run(run())


def haystack_async(pipeline: Pipeline, queries: list[str]) -> Ranked:
    async def run() -> Ranked:
        return [[(d.id, d.score) for d in (await pipeline.run_async({"retriever": {"query": q}}))["joiner"]["documents"]]
                for q in queries]

    return asyncio.run(run())


def langchain_async(retriever: lc.Retriever, queries: list[str]) -> Ranked:
    async def run() -> Ranked:
        found = await asyncio.gather(*(retriever.ainvoke(q) for q in queries))
        return [[(d.id, d.metadata["score"]) for d in docs] for docs in found]

    return asyncio.run(run())


RUNS: dict[str, tuple[Any, Any, Any, Any]] = {  # the retriever, what runs it (a pipeline or itself), sync, async
    "llamaindex": (li.Retriever, lambda r: r, llamaindex_query_engine, llamaindex_async),
    "haystack": (hs.Retriever, haystack_pipeline, haystack_run, haystack_async),  # one pipeline, sync and async
    "langchain": (lc.Retriever, lambda r: r, langchain_chain, langchain_async),  # batch: from threads at once
}


def searcher_of(retriever: Any) -> McpServer:
    return retriever._searcher if isinstance(retriever, hs.Retriever) else retriever.searcher  # type: ignore[no-any-return]


@pytest.mark.parametrize("framework", list(RUNS))
def test_from_mcp_equals_from_yaml_sync_and_async_on_one_session(framework: str, relay: Relay,
                                                                  built_project: Path) -> None:
    kind, wrap, run_sync, run_async = RUNS[framework]
    want = run_sync(wrap(kind.from_yaml(built_project, top_k=K)), QUERIES)
    assert all(len(row) == K for row in want)
    retriever = kind.from_mcp(relay.url, token=TOKEN_A, top_k=K)
    runs = wrap(retriever)
    try:
        same(run_sync(runs, QUERIES), want)
        same(run_async(runs, QUERIES), want)
        same(run_sync(runs, QUERIES[:2]), want[:2])
        assert relay.calls == 2 * len(QUERIES) + 2  # every search went through the relay...
        assert relay.sessions == 1 and len(relay.session_ids()) == 1  # ...on one MCP session
        assert searcher_of(retriever).sessions == 1
    finally:
        retriever.close()
    assert relay.deletes == 1  # close() ended the session at the server


def test_metadata_and_filters_come_through_as_from_yaml(relay: Relay, built_project: Path) -> None:
    flt = {"topic": "biology", "year": {"$gte": 2020}}
    with McpServer(relay.url, TOKEN_A) as searcher:
        for f in (None, flt):
            over_mcp = lc.Retriever(searcher=searcher, filter=f, search_options={"top_k": K})
            local = lc.Retriever.from_yaml(built_project, filter=f, top_k=K)
            for query in QUERIES[:4]:
                got, want = over_mcp.invoke(query), local.invoke(query)
                assert [d.id for d in got] == [d.id for d in want] and got
                assert [d.page_content for d in got] == [d.page_content for d in want]
                scores = [d.metadata.pop("score") for d in got], [d.metadata.pop("score") for d in want]
                assert scores[0] == pytest.approx(scores[1], abs=SCORES)
                assert [d.metadata for d in got] == [d.metadata for d in want]
        assert searcher.sessions == 1
    assert relay.sessions == 1 and relay.calls == 8


def test_a_session_the_server_dropped_is_opened_again(relay: Relay, server: Server, built_project: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    retriever = li.Retriever.from_mcp(relay.url, token=TOKEN_A, top_k=K)
    want = llamaindex_query_engine(li.Retriever.from_yaml(built_project, top_k=K), QUERIES[:2])
    try:
        same(llamaindex_query_engine(retriever, QUERIES[:1]), want[:1])
        (session_id,) = relay.session_ids()
        ended = httpx.delete(f"{server.url}/mcp", timeout=10, headers={  # the server ends it (not via the relay)
            "Authorization": f"Bearer {TOKEN_A}", "Mcp-Session-Id": session_id.decode(),
            "Mcp-Protocol-Version": "2025-11-25"})
        assert ended.status_code in (200, 204)
        with caplog.at_level(logging.WARNING, logger="retriever.integrations"):
            same(llamaindex_query_engine(retriever, QUERIES[1:2]), want[1:])
        assert "the MCP session was lost" in caplog.text
        assert relay.sessions == 2 and retriever.searcher.sessions == 2
    finally:
        retriever.close()


def test_a_wrong_token_is_named_without_the_token(relay: Relay) -> None:
    wrong = "not-the-token-7c1e2b"
    retriever = lc.Retriever.from_mcp(relay.url, token=wrong, top_k=K)
    try:
        with pytest.raises(RemoteError, match="answered 401 to the MCP handshake.*from_mcp\\(url, token=...\\)") as e:
            retriever.invoke("what is BM25?")
        assert wrong not in str(e.value) and wrong not in repr(e.value)
        assert wrong not in repr(retriever.searcher) and "token=***" in repr(retriever.searcher)
        assert wrong not in repr(retriever)
    finally:
        retriever.close()
    with pytest.raises(RemoteError, match="answered 401"):
        asyncio.run(li.Retriever.from_mcp(relay.url, top_k=K).aretrieve("x"))  # no token at all


def test_an_option_the_agent_search_does_not_take_is_refused_by_name() -> None:
    url = "http://127.0.0.1:9/mcp"  # never reached: refused before any call
    with pytest.raises(InvalidInputError, match="takes no fusion; over MCP the options are mode, top_k, filters, "
                                                "collection"):
        li.Retriever.from_mcp(url, fusion="rrf")
    with pytest.raises(InvalidInputError, match="takes no score_threshold, candidate_depth"):
        lc.Retriever.from_mcp(url, score_threshold=0.5, candidate_depth=40)
    with pytest.raises(InvalidInputError, match="takes no scale_score"):
        hs.Retriever.from_mcp(url, scale_score=False)
    with pytest.raises(InvalidInputError, match="takes no query_instruction"):
        McpServer(url).search(["x"], SearchOptions(query_instruction="q: "))


def test_haystack_yaml_holds_the_mcp_url_and_a_token_variable_only(relay: Relay, monkeypatch: Any) -> None:
    monkeypatch.setenv("RETRIEVER_TOKEN", TOKEN_A)
    pipeline = haystack_pipeline(hs.Retriever.from_mcp(relay.url, top_k=2))
    text = pipeline.dumps()
    assert f"mcp_url: {relay.url}" in text and "RETRIEVER_TOKEN" in text and TOKEN_A not in text
    loaded = Pipeline.loads(text, allowed_modules=HAYSTACK)
    assert haystack_run(loaded, ["lanterns", "neural networks"]) == haystack_run(pipeline, ["lanterns",
                                                                                             "neural networks"])
    with pytest.raises(ValueError, match="Cannot serialize token-based secret"):  # Haystack's own refusal
        haystack_pipeline(hs.Retriever.from_mcp(relay.url, token=TOKEN_A)).dumps()
    for p in (pipeline, loaded):
        p.get_component("retriever").close()
    assert relay.sessions == 2  # one per component, each for its runs


def test_close_ends_the_session_and_the_thread(relay: Relay) -> None:
    with McpServer(relay.url, TOKEN_A) as searcher:
        assert len(searcher.search(QUERIES[:3], SearchOptions(top_k=2))) == 3
        thread = searcher._runner.thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive() and relay.deletes == 1
    with pytest.raises(RemoteError, match="closed"):
        searcher.search(["x"], SearchOptions())


def test_an_mcp_server_that_is_not_there_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with McpServer(url, "a-token") as searcher:
        assert searcher.url == f"{url}/mcp"
        with pytest.raises(RemoteError, match=f"{url}/mcp: cannot reach it .*retriever serve --transport http"):
            searcher.search(["x"], SearchOptions())


def test_from_mcp_pages_through_the_server_s_reply_budget(built_project: Path,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    small = Server("serve", built_project, tmp_path_factory.mktemp("small"), "reply.max_bytes=1500")
    relay = Relay(small.port)
    try:
        retriever = li.Retriever.from_mcp(relay.url, token=TOKEN_A, top_k=20)
        got = llamaindex_query_engine(retriever, QUERIES[:2])
        retriever.close()
        assert relay.calls > 2  # one reply would not hold them all: more pages were asked for
    finally:
        relay.stop()
        small.stop()
    want = llamaindex_query_engine(li.Retriever.from_yaml(built_project, top_k=20), QUERIES[:2])
    assert all(len(row) == 20 for row in want)
    same(got, want)
