"""Every tool that returns stored content answers within the reply budget (issue 45): get_document
collapses repeated ids, bounds distinct ids by limits.max_ids and pages through documents and texts
larger than the budget; a search hit too large for the budget comes cut, so a page is never empty
and paging always progresses. Real parts: the packaged MiniLM, FAISS, bm25s, fastmcp's client, and
`retriever serve --transport http` on 127.0.0.1 for the 300,000-id request."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, MCP, copy_built
from fastmcp import Client
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import engine_for
from test_agent import Agent

BUDGET = 6_000
TOKEN = "bounds-7c1e42"


def agent(built_project: Path, tmp_path: Path, budget: int = BUDGET, **limits: int) -> Agent:
    overrides: dict[str, Any] = {"reply": {"max_bytes": budget}}
    if limits:
        overrides["limits"] = limits
    return Agent(engine_for(copy_built(built_project, tmp_path / "p"), overrides))


def reply_bytes(a: MCP, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any], int]:
    result = a.call(tool, args)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text), len(result.content[0].text.encode())


def test_repeated_ids_collapse_and_the_reply_stays_within_the_budget(built_project: Path, tmp_path: Path) -> None:
    a = agent(built_project, tmp_path)
    out, size = reply_bytes(a, "get_document", {"ids": ["doc11", "doc03"] * 20_000 + ["nope"] * 5})
    assert [d["id"] for d in out["documents"]] == ["doc11", "doc03"] and out["missing"] == ["nope"]
    assert size <= BUDGET + 200 and "truncated" not in out


def test_distinct_ids_over_max_ids_are_refused_naming_the_limit(built_project: Path, tmp_path: Path) -> None:
    a = agent(built_project, tmp_path, max_ids=10)
    assert a.ok("get_document", {"ids": [f"doc{i % 10:02d}" for i in range(500)]})["documents"]  # 10 distinct: served
    err = a.error("get_document", {"ids": [f"doc{i:02d}" for i in range(11)]})
    assert "distinct ids: 11, the limit is 10 (limits.max_ids)" in err


def read_all(a: MCP, ids: list[str], budget: int) -> tuple[list[dict[str, Any]], int]:
    """Every page of get_document(ids) followed to the end, texts of one document joined; and the pages."""
    docs: list[dict[str, Any]] = []
    offset, start, pages = 0, 0, 0
    while True:
        out, size = reply_bytes(a, "get_document", {"ids": ids, "offset": offset, "start": start})
        pages += 1
        assert size <= budget + 400, f"page {pages}: {size} bytes"
        assert out["documents"] or out["missing"], f"page {pages} is empty: {out}"
        for d in out["documents"]:
            if docs and start and docs[-1]["id"] == d["id"] and d is out["documents"][0]:
                docs[-1]["text"] += d["text"]
            else:
                docs.append(d)
        note = out.get("truncated")
        if note is None:
            return docs, pages
        assert (note["next_offset"], note["next_start"]) > (offset, start), note  # always further on
        offset, start = note["next_offset"], note["next_start"]


def test_documents_over_the_budget_are_paged_whole_by_offset_and_start(built_project: Path, tmp_path: Path) -> None:
    long = " ".join(f"Glacier {i} carves a valley of moraine and ice." for i in range(1500))  # 70 KB
    a = agent(built_project, tmp_path)
    a.ok("add_documents", {"documents": [{"id": "long", "contents": long}]})
    whole = Agent(engine_for(Path(tmp_path / "p" / "parameter.yaml"), {"reply": {"max_bytes": 0}}))
    ids = ["doc01", "long", "doc02", "nope", *[f"doc{i:02d}" for i in range(3, 30)]]
    expected = whole.ok("get_document", {"ids": ids})["documents"]
    got, pages = read_all(a, ids, BUDGET)
    assert [d["id"] for d in got] == [d["id"] for d in expected]
    assert [d["text"] for d in got] == [d["text"] for d in expected]
    assert pages > len(long.encode()) // BUDGET


def test_metadata_over_the_budget_is_cut_and_the_text_still_comes(built_project: Path, tmp_path: Path) -> None:
    a = agent(built_project, tmp_path)
    a.ok("add_documents", {"documents": [{"id": "fat", "contents": "Kelp forests.", "blob": "x" * 20_000}]})
    out, size = reply_bytes(a, "get_document", {"ids": ["fat", "doc01"]})
    assert size <= BUDGET + 400
    assert out["documents"][0] == {"id": "fat", "text": "Kelp forests.", "metadata": {}, "metadata_cut": True}
    assert out["truncated"]["next_offset"] == 1


def writer_blankets(a: MCP) -> None:
    """The issue's attack: 30 documents with 110 KB of metadata each that every query finds first."""
    blob = {f"k{i}": "x" * 110 for i in range(1000)}
    a.ok("add_documents", {"documents": [{"id": f"000{i:02d}", "contents": f"earthquakes shake the ground {i}", **blob}
                                         for i in range(30)]})


@pytest.mark.parametrize("tool, args", [
    pytest.param("search", {"query": "earthquakes", "top_k": 10}, id="agent"),
    pytest.param("retriever_search", {"query_list": ["earthquakes"], "top_k": 10, "return_metadata": True},
                 id="classic"),
])
def test_hits_over_the_budget_never_blank_a_page(built_project: Path, tmp_path: Path, tool: str,
                                                 args: dict[str, Any]) -> None:
    a = MCP(engine_for(copy_built(built_project, tmp_path / "p"), {"reply": {"max_bytes": 100_000}}))  # full profile
    writer_blankets(a)
    offset, seen = 0, []
    for _ in range(3):
        out, size = reply_bytes(a, tool, {**args, "offset": offset})
        ids = [h["id"] for h in out["results"][0]["hits"]] if tool == "search" else out["ret_ids"][0]
        note = out["truncated"]
        assert ids and size <= 100_000 + 2_000, (size, note)
        assert note["next_offset"] == offset + len(ids) and note["hits_cut"] >= 1
        seen += ids
        offset = note["next_offset"]
    assert len(set(seen)) == len(seen) == 3
    if tool == "search":  # the advice names only what the agent's search takes
        assert "return_text" not in note["how"] and "max_bytes" not in note["how"] and "top_k" in note["how"]


# ---- the real HTTP server ---------------------------------------------------------------------


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


@pytest.fixture
def http_agent(built_project: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`retriever serve --transport http` on the built project with the shipped profile (the agent's)."""
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(built_project), "--transport", "http",
                             "--port", str(port), "--init"], stderr=log, env={**os.environ, "RETRIEVER_HTTP_TOKENS": TOKEN})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc, lambda: log.seek(0) or log.read()[-3000:], timeout=120, any_status=True)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(30)


def test_get_document_of_300000_ids_over_http_answers_within_the_budget(
        http_agent: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = http_agent

    async def run(ids: list[str]) -> tuple[str, bool]:
        async with Client(url, auth=TOKEN, timeout=120) as client:
            result = await client.call_tool("get_document", {"ids": ids}, raise_on_error=False)
            return result.content[0].text, result.is_error

    asyncio.run(run(["doc11"]))  # the first call opens the collection
    before = peak_rss_mb(proc.pid)
    text, failed = asyncio.run(run(["doc11"] * 300_000))
    after = peak_rss_mb(proc.pid)
    print(f"serve's peak RSS (VmHWM): {before:.0f} MB before get_document of 300,000 ids, {after:.0f} MB after; "
          f"reply {len(text.encode())} bytes", file=sys.stderr)
    assert not failed, text[:500]
    out = json.loads(text)
    assert [d["id"] for d in out["documents"]] == ["doc11"] and len(text.encode()) <= 100_000
    assert after - before < 400, f"peak RSS grew {after - before:.0f} MB for one reply"


def test_a_neighbourhood_over_the_budget_comes_cut_within_it(built_project: Path, tmp_path: Path) -> None:
    """retriever_get_neighbors (the classic tool) sent the chunks and their merge whole: three
    60 KB chunks made a 360 KB reply against a 6 KB budget."""
    mcp = MCP(engine_for(copy_built(built_project, tmp_path / "p"), {"reply": {"max_bytes": BUDGET}}))
    mcp.ok("retriever_init")
    big = [{"id": f"big:{n}", "contents": f"part {n} " + "lorem ipsum dolor " * 3_500, "source_id": "big", "split_id": n}
           for n in range(3)]
    mcp.ok("retriever_add", {"documents": big})
    result = mcp.call("retriever_get_neighbors", {"id": "big:1", "before": 1, "after": 1})
    out = json.loads(result.content[0].text)
    assert len(result.content[0].text.encode()) <= BUDGET and "reply.max_bytes" in out["truncated"]["reason"]
    assert out["ids"] == ["big:0", "big:1", "big:2"] and all(t.startswith("part") for t in out["texts"])
    small = mcp.ok("retriever_get_neighbors", {"id": "doc05", "before": 1, "after": 1})
    assert "truncated" not in small  # within the budget: as it was
