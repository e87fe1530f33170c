"""MCP tasks (the 2025-11-25 revision's experimental utility, mcp/tasks.py) on both transports, driven
by the official MCP SDK's own client and types: our stdio server (`retriever serve`) and FastMCP's
streamable HTTP (`retriever serve --transport http` with a token). A long tool called as a task is
answered at once with the task, polled with tasks/get to `completed`, and its tasks/result is what
a plain call answers; a sync over many files cancelled with tasks/cancel stops between files (the
next sync finds files it had not done); a tool without taskSupport asked as a task is refused with
-32601, as the spec says; another token cannot see a task."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from conftest import BIN
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from retriever.testing.folders import FILLER
from test_http_hardening import TOKEN_A, TOKEN_B, Server
from test_sync import project as synced_project

LONG = {"sync_sources", "ingest_document", "retriever_embed", "retriever_index", "bm25_index"}
NOTES = 600


def project(root: Path, notes: int = NOTES) -> Path:
    """A project whose documents are a folder of `notes` short notes (a sync commits every 8 chunks)."""
    docs = root / "notes"
    docs.mkdir(parents=True)
    for i in range(notes):
        (docs / f"note{i:03}.md").write_text(f"# Note {i}\n\n" + FILLER * 3 + f" Entry {i} of the ledger.\n")
    return synced_project(root / "p", docs, commit_chunks=8)


@contextlib.asynccontextmanager
async def connect(transport: str, config: Path, tmp: Path, token: str = TOKEN_A,
                  server: Server | None = None) -> AsyncIterator[Client]:
    """The SDK's client on the 2025-11-25 handshake (`legacy`: the revision whose core has tasks)."""
    if transport == "stdio":
        params = StdioServerParameters(command=str(BIN / "retriever"),
                                       args=["serve", "--config", str(config), "--tools", "full"])
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            await client.call_tool("retriever_init", {})
            yield client
        return
    assert server is not None
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode="legacy",
                   read_timeout_seconds=120) as client:
        yield client


@contextlib.contextmanager
def served(transport: str, config: Path, tmp: Path) -> Any:
    if transport == "stdio":
        yield None
        return
    server = Server("serve", config, tmp)
    try:
        yield server
    finally:
        server.stop()


async def as_task(client: Client, name: str, arguments: dict[str, Any], ttl: int = 60_000) -> types.Task:
    """tools/call with `task`, made of the SDK's types and sent on its session's dispatcher with its
    stamp (the revision's header): the SDK 2.x has the 2025-11-25 task types but checks a tools/call
    answer against CallToolResult alone, so its send_request refuses a CreateTaskResult."""
    params = types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata(ttl=ttl))
    data = types.CallToolRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
    session, opts = client.session, {}  # type: ignore[var-annotated]
    session._stamp(data, opts)
    raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)
    return types.CreateTaskResult.model_validate(raw, by_name=False).task


async def get(client: Client, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.GetTaskResult)


async def poll(client: Client, task_id: str, done: Callable[[types.GetTaskResult], bool],
               limit: float = 120) -> types.GetTaskResult:
    end = time.monotonic() + limit
    while not done(got := await get(client, task_id)):
        assert time.monotonic() < end, got
        await asyncio.sleep(0.05)
    return got


async def result(client: Client, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CallToolResult)


def plain(r: types.CallToolResult) -> tuple[Any, ...]:
    return [c.model_dump() for c in r.content], r.structured_content, r.is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_long_tool_runs_as_a_task_polled_to_completed_and_answers_as_a_plain_call(transport: str,
                                                                                     tmp_path: Path) -> None:
    config = project(tmp_path, notes=12)

    async def run(server: Server | None) -> None:
        async with connect(transport, config, tmp_path, server=server) as client:
            caps = client.server_capabilities.tasks
            assert caps is not None and caps.requests is not None and caps.requests.tools is not None
            listed = {t.name: t.execution for t in (await client.list_tools()).tools}
            assert {n for n, e in listed.items() if e is not None} == LONG & set(listed)
            assert all(listed[n].task_support == "optional" for n in LONG & set(listed))  # type: ignore[union-attr]
            await client.call_tool("sync_sources", {})  # documents in the collection
            task = await as_task(client, "bm25_index", {"overwrite": True})
            assert task.status == "working" and task.ttl == 60_000 and task.poll_interval
            done = await poll(client, task.task_id, lambda t: t.status != "working")
            assert done.status == "completed", done
            got = await result(client, task.task_id)
            assert (got.meta or {})["io.modelcontextprotocol/related-task"] == {"taskId": task.task_id}
            again = await client.call_tool("bm25_index", {"overwrite": True})
            assert not got.is_error and plain(got) == plain(again)
            listed_tasks = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            assert [t.task_id for t in listed_tasks.tasks] == [task.task_id]
            # a tool without taskSupport asked as a task: -32601 (Method not found), as the spec says
            with pytest.raises(MCPError) as refused:
                await as_task(client, "retriever_search", {"query_list": ["ledger"], "top_k": 1})
            assert refused.value.error.code == -32601 and "task" in refused.value.error.message
            with pytest.raises(MCPError) as unknown:  # an unknown task id: -32602
                await get(client, "no-such-task")
            assert unknown.value.error.code == -32602
            if server is not None:  # another token sees no task of this one
                async with connect(transport, config, tmp_path, TOKEN_B, server) as other:
                    with pytest.raises(MCPError) as hidden:
                        await get(other, task.task_id)
                    assert hidden.value.error.code == -32602
                    mine = await other.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
                    assert mine.tasks == []

    with served(transport, config, tmp_path) as server:
        asyncio.run(run(server))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_cancelled_sync_task_stops_between_files_and_the_next_sync_does_the_rest(transport: str,
                                                                                   tmp_path: Path) -> None:
    """tasks/cancel sets the call's CANCEL event as notifications/cancelled does: the sync stops at
    its next file, the task says `cancelled` (and stays so), and the next sync finds files the
    cancelled one had not done; the batches it committed stay."""
    config = project(tmp_path)

    def past_two_batches(t: types.GetTaskResult) -> bool:  # its statusMessage: "N of M done: file"
        message = t.status_message or ""
        return t.status != "working" or (" of " in message and int(message.split(" of ")[0]) > 16)

    async def run(server: Server | None) -> tuple[Any, ...]:
        async with connect(transport, config, tmp_path, server=server) as client:
            task = await as_task(client, "sync_sources", {})
            seen = await poll(client, task.task_id, past_two_batches)
            cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id))
            cancelled = await client.session.send_request(cancel, types.CancelTaskResult)
            with pytest.raises(MCPError) as again:  # a terminal task cannot be cancelled again
                await client.session.send_request(cancel, types.CancelTaskResult)
            with pytest.raises(MCPError):  # nor has it a tool result
                await result(client, task.task_id)
            synced = (await client.call_tool("sync_sources", {})).content[0]
            report = json.loads(synced.text)  # type: ignore[union-attr]
            after = await get(client, task.task_id)
            return seen, cancelled, again.value.error.code, report, after

    with served(transport, config, tmp_path) as server:
        seen, cancelled, code, report, after = asyncio.run(run(server))
    assert seen.status == "working", seen  # it was still working when cancelled
    assert cancelled.status == "cancelled" and after.status == "cancelled" and code == -32602
    # the cancelled sync committed some batches and not all: the next one skipped those and did the rest
    assert 0 < report["unchanged"] < NOTES and report["unchanged"] + report["new"] == NOTES, report
