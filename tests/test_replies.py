"""Replies that fit every client: a budget that keeps each query's best hits and says what it cut,
paging with offset, complete results on request, JSON text that UltraRAG's client can parse."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import MCP
from fastmcp import Client

Q = "How do plants turn sunlight into sugar?"
QUERIES = [f"{Q} {i}" for i in range(120)] + ["earthquakes and volcanoes", "ocean tides"]


def text_json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)  # as UltraRAG's client reads every reply


@pytest.mark.parametrize("tool, args", [
    pytest.param("retriever_search", {"query_list": QUERIES}, id="dense"),
    pytest.param("bm25_search", {"query_list": QUERIES}, id="bm25"),
    pytest.param("retriever_hybrid_search", {"query_list": QUERIES}, id="hybrid"),
    pytest.param("retriever_batch_search", {"batch_query_list": [QUERIES[:60], QUERIES[60:]]}, id="batch"),
])
def test_the_budget_keeps_every_query_and_announces_the_cut(mcp_built: MCP, tool: str, args: dict) -> None:
    result = mcp_built.call(tool, {**args, "top_k": 30, "max_bytes": 40_000})
    out = text_json(result)
    assert len(result.content[0].text.encode()) < 50_000  # the budget, plus the envelope
    note = out["truncated"]
    assert note["next_offset"] >= 1 and "offset=" in note["how"]
    assert all(n >= 1 for n in note["hits_sent"]) and sum(note["hits_sent"]) < sum(note["hits_found"])
    ids = out.get("ret_ids") or [q for g in out["ret_ids_ls"] for q in g]
    assert [len(q) for q in ids] == note["hits_sent"]


def test_the_default_budget_fits_an_agent_host(mcp_built: MCP) -> None:
    result = mcp_built.call("retriever_search", {"query_list": QUERIES, "top_k": 30})
    assert len(result.content[0].text.encode()) < 110_000 and "truncated" in text_json(result)


def test_pages_put_together_are_the_complete_result(mcp_built: MCP) -> None:
    args = {"query_list": QUERIES[:40], "top_k": 20}
    full = text_json(mcp_built.call("retriever_search", {**args, "max_bytes": 0}))
    assert "truncated" not in full and [len(q) for q in full["ret_ids"]] == [20] * 40
    pages: list[list[str]] = [[] for _ in range(40)]
    offset, calls = 0, 0
    while True:
        out = text_json(mcp_built.call("retriever_search", {**args, "offset": offset, "max_bytes": 20_000}))
        calls += 1
        for got, ids in zip(pages, out["ret_ids"]):
            got.extend(ids)  # each page as it comes: a hit sent twice shows up twice
        if "truncated" not in out:
            break
        assert out["truncated"]["next_offset"] > offset
        offset = out["truncated"]["next_offset"]
    assert calls > 2 and all(len(p) == len(set(p)) for p in pages), "a hit was sent twice"
    assert [p[:20] for p in pages] == full["ret_ids"]  # a page holds top_k hits after the offset


def test_passages_are_clipped_on_request(mcp_built: MCP) -> None:
    out = text_json(mcp_built.call("retriever_search", {"query_list": Q, "top_k": 3, "max_chars": 20}))
    assert all(len(p) <= 20 for p in out["ret_psg"][0])
    assert out["truncated"]["passages_clipped"] == 3 and "hits_sent" not in out["truncated"]


def test_small_replies_carry_structured_content_too(mcp_built: MCP) -> None:
    result = mcp_built.call("retriever_search", {"query_list": Q, "top_k": 2})
    assert text_json(result) == result.structured_content


def test_a_large_result_over_http_is_a_bounded_paged_reply(http_server: str) -> None:
    async def run() -> Any:
        async with Client(http_server, auth="tok-new-222", timeout=300) as client:
            return await client.call_tool("retriever_search", {"query_list": [f"q {i}" for i in range(400)],
                                                               "top_k": 30, "max_bytes": 0})

    result = asyncio.run(run())  # 400 x 30 passages: about 1.8 MB unbounded
    out = text_json(result)
    assert len(result.content[0].text.encode()) < 1_000_000
    assert out["truncated"]["next_offset"] >= 1 and all(n >= 1 for n in out["truncated"]["hits_sent"])


def test_json_bytes_is_the_json_text_json_dumps_writes() -> None:
    """The replies' serialiser (pydantic-core) writes what compact json.dumps(ensure_ascii=False) writes, so a
    client parses the same reply; a lone surrogate, which UTF-8 cannot carry, goes escaped."""
    from retriever.api.replies import _size, json_bytes

    value = {"ret_psg": [["Ünïcödé — naïve café", 'quote " back\\ slash\ttab\n', "😀 \u2028 \x00"]],
             "scores": [[0.8125, 1e-07, 3.0, -0.0, 12345678901234567890]], "ok": True, "none": None, "ids": ["1", 2]}
    assert json.loads(json_bytes(value)) == value
    # byte for byte, but for the exponent's spelling (json.dumps writes 1e-07)
    assert json_bytes(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace(
        "1e-07", "1e-7").encode()
    for text in value["ret_psg"][0]:
        assert _size(text) == len(json.dumps(text, ensure_ascii=False).encode())
    lone = {"query": "a\ud800b"}
    assert json_bytes(lone) == b'{"query":"a\\ud800b"}' and json.loads(json_bytes(lone)) == lone
    assert _size(lone["query"]) == len(json.dumps(lone["query"]))  # counted as it is written: escaped
    meta = {"source": "café", "page": 3, "score": 0.25, "tags": ["a", "\n"], "none": None}
    assert _size(meta) == len(json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode())
