"""The 2026-07-28 revision's tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663; mcp/tasks.py)
on both servers. Over our stdio server with raw JSON-RPC lines: server/discover declares it; a long
tool's call from a client that declared the extension on the request is answered with a
CreateTaskResult (`resultType: "task"`), tasks/get polled to `completed` carries what a plain call
answers; a sync cancelled with tasks/cancel ends `cancelled` and stops between files; a call without
the extension declared, and a tool that does not run long, run plainly; a client that did not
declare it gets -32021 for tasks/*; tasks/result and tasks/list are gone (-32601). The MCP SDK's own
client, given a small extension that claims `resultType: "task"` and polls tasks/get, drives it over
stdio and streamable HTTP with a token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types as types
import pytest
from conftest import BIN
from mcp.client.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field
from test_http_hardening import TOKEN_A, Server
from test_stdio import Raw
from test_tasks import NOTES, project

EXT = "io.modelcontextprotocol/tasks"
VERSION = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
DECLARED = {"_meta": {**VERSION, "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}}
UNDECLARED = {"_meta": {**VERSION, "io.modelcontextprotocol/clientCapabilities": {}}}


def call(raw: Raw, name: str, arguments: dict[str, Any], meta: dict[str, Any] = DECLARED, **more: Any) -> Any:
    return raw.ask("tools/call", {"name": name, "arguments": arguments, **meta, **more})


def poll(raw: Raw, task_id: str, done: Callable[[dict[str, Any]], bool], limit: float = 120) -> dict[str, Any]:
    end = time.monotonic() + limit
    while not done(got := raw.ask("tasks/get", {"taskId": task_id, **DECLARED})["result"]):
        assert time.monotonic() < end, got
        time.sleep(0.05)
    return got


def past_two_batches(t: dict[str, Any]) -> bool:  # a sync's statusMessage: "N of M done: file"
    message = t.get("statusMessage") or ""
    return t["status"] != "working" or (" of " in message and int(message.split(" of ")[0]) > 16)


def plain(result: dict[str, Any]) -> tuple[Any, ...]:
    return result["content"], result.get("structuredContent"), result.get("isError")


def test_a_long_tool_called_by_a_declaring_client_answers_a_task_polled_to_its_result(tmp_path: Path) -> None:
    raw = Raw("serve", "--config", str(project(tmp_path, notes=12)), "--tools", "full")
    try:
        found = raw.ask("server/discover", DECLARED)["result"]
        assert found["capabilities"]["extensions"] == {EXT: {}}
        assert "tasks" not in found["capabilities"]  # the 2025-11-25 capability is not declared with it
        assert all("execution" not in t for t in raw.ask("tools/list", DECLARED)["result"]["tools"])
        assert not call(raw, "retriever_init", {})["result"]["isError"]  # no long tool: plainly
        assert call(raw, "sync_sources", {}, UNDECLARED)["result"]["resultType"] == "complete"
        created = call(raw, "bm25_index", {"overwrite": True})["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        assert created["ttlMs"] > 0 and created["pollIntervalMs"] > 0 and created["createdAt"]
        assert "content" not in created and "task" not in created
        done = poll(raw, created["taskId"], lambda t: t["status"] != "working")
        assert done["status"] == "completed" and done["resultType"] == "complete", done
        again = call(raw, "bm25_index", {"overwrite": True}, UNDECLARED)["result"]  # not declared: plainly
        assert again["resultType"] == "complete" and not again["isError"]
        assert plain(done["result"]) == plain(again)
        # the extension ignores `task` (2025-11-25's opt-in): not declared, a plain call all the same
        asked = call(raw, "bm25_index", {"overwrite": True}, UNDECLARED, task={"ttl": 60_000})["result"]
        assert asked["resultType"] == "complete" and plain(asked) == plain(again)
        searched = call(raw, "bm25_search", {"query_list": ["ledger"], "top_k": 1})["result"]
        assert searched["resultType"] == "complete" and not searched["isError"]  # no long tool: never a task
        acked = raw.ask("tasks/update", {"taskId": created["taskId"], "inputResponses": {}, **DECLARED})
        assert acked["result"] == {"resultType": "complete"}  # nothing of ours asks for input
        undeclared = raw.ask("tasks/get", {"taskId": created["taskId"], **UNDECLARED})["error"]
        assert undeclared["code"] == -32021
        assert undeclared["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
        for gone in ("tasks/result", "tasks/list"):
            assert raw.ask(gone, {"taskId": created["taskId"], **DECLARED})["error"]["code"] == -32601
        assert raw.ask("tasks/get", {"taskId": "no-such-task", **DECLARED})["error"]["code"] == -32602
    finally:
        assert raw.close() == 0


def test_a_sync_task_cancelled_ends_cancelled_and_its_work_stops_between_files(tmp_path: Path) -> None:
    """tasks/cancel (an empty acknowledgement) sets the call's CANCEL event: the sync stops at its
    next file, the task stays `cancelled`, and the next plain sync finds files it had not done."""
    raw = Raw("serve", "--config", str(project(tmp_path)), "--tools", "full")
    try:
        call(raw, "retriever_init", {})
        created = call(raw, "sync_sources", {})["result"]
        assert created["resultType"] == "task", created

        seen = poll(raw, created["taskId"], past_two_batches)
        assert seen["status"] == "working", seen  # it was still working when cancelled
        cancelled = raw.ask("tasks/cancel", {"taskId": created["taskId"], **DECLARED})
        assert cancelled["result"] == {"resultType": "complete"}
        report = json.loads(call(raw, "sync_sources", {}, UNDECLARED)["result"]["content"][0]["text"])
        after = raw.ask("tasks/get", {"taskId": created["taskId"], **DECLARED})["result"]
        assert after["status"] == "cancelled" and "result" not in after, after
        assert raw.ask("tasks/cancel", {"taskId": created["taskId"], **DECLARED})["result"] == {"resultType": "complete"}
    finally:
        assert raw.close() == 0
    # the cancelled sync committed some batches and not all: the next one skipped those and did the rest
    assert 0 < report["unchanged"] < NOTES and report["unchanged"] + report["new"] == NOTES, report


async def send(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request of a method the SDK has no type for, stamped as its session stamps its own (the
    revision and the client's capabilities, the extension's among them where declared, in _meta)."""
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


class CreateTaskResult(types.Result):
    """The extension's CreateTaskResult (Result & Task, flat), as a claim model of the SDK's client."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class Tasks(ClientExtension):
    """The tasks extension for the SDK 2.3 client, which ships none: declares it on each request and
    resolves a CreateTaskResult by polling tasks/get (on its session, stamped as its requests are)."""

    identifier = EXT

    def __init__(self) -> None:
        self.created: list[CreateTaskResult] = []
        self.polled: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        while True:
            got = await send(ctx.session, "tasks/get", {"taskId": created.task_id})
            self.polled.append(got)
            if got["status"] == "completed":
                return types.CallToolResult.model_validate(got["result"], by_name=False)
            assert got["status"] == "working", got
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def connect(transport: str, config: Path, server: Server | None, tasks: Tasks | None) -> AsyncIterator[Client]:
    """The SDK's client on 2026-07-28 (mode "auto": server/discover, then 2026-07-28), with the extension or without."""
    extensions = [tasks] if tasks is not None else None
    if transport == "stdio":
        params = StdioServerParameters(command=str(BIN / "retriever"),
                                       args=["serve", "--config", str(config), "--tools", "full"])
        async with Client(params, mode="auto", read_timeout_seconds=120, extensions=extensions) as client:
            yield client
        return
    assert server is not None
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=120) as http, \
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode="auto",
                   read_timeout_seconds=120, extensions=extensions) as client:
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


def sdk_dump(r: types.CallToolResult) -> tuple[Any, ...]:
    return [c.model_dump() for c in r.content], r.structured_content, r.is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_sdk_s_client_with_the_extension_gets_a_task_and_its_result(transport: str, tmp_path: Path) -> None:
    config = project(tmp_path, notes=12)
    tasks = Tasks()

    async def run(server: Server | None) -> tuple[Any, ...]:
        async with connect(transport, config, server, tasks) as client:
            assert (client.server_capabilities.extensions or {})[EXT] == {}  # FastMCP's declares Apps' too
            await client.call_tool("retriever_init", {})
            await client.call_tool("sync_sources", {})
            assert len(tasks.created) == 1  # sync_sources ran as a task
            as_task = await client.call_tool("bm25_index", {"overwrite": True})
            searched = await client.call_tool("bm25_search", {"query_list": ["ledger"], "top_k": 1})
        async with connect(transport, config, server, None) as client:  # the extension not declared
            await client.call_tool("retriever_init", {})  # over stdio, another server
            plainly = await client.call_tool("bm25_index", {"overwrite": True})
            if server is not None:  # the same server: the task is there, but this client did not declare it
                with pytest.raises(MCPError) as undeclared:
                    await send(client.session, "tasks/get", {"taskId": tasks.created[-1].task_id})
                assert undeclared.value.error.code == -32021
        return as_task, searched, plainly

    with served(transport, config, tmp_path) as server:
        as_task, searched, plainly = asyncio.run(run(server))
    assert len(tasks.created) == 2 and all(c.status == "working" for c in tasks.created)  # not bm25_search
    assert tasks.polled[-1]["status"] == "completed" and tasks.polled[-1]["resultType"] == "complete"
    assert not as_task.is_error and not searched.is_error and sdk_dump(as_task) == sdk_dump(plainly)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_sync_task_the_sdk_s_client_cancels_ends_cancelled(transport: str, tmp_path: Path) -> None:
    """The CreateTaskResult taken as it is (allow_claimed), tasks/cancel sent while the sync works:
    the task ends `cancelled`, and the next sync finds files the cancelled one had not done."""
    config = project(tmp_path)

    async def run(server: Server | None) -> tuple[Any, ...]:
        async with connect(transport, config, server, Tasks()) as client:
            await client.call_tool("retriever_init", {})
            created = await client.session.call_tool("sync_sources", {}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            end = time.monotonic() + 120
            while not past_two_batches(got := await send(client.session, "tasks/get", {"taskId": created.task_id})):
                assert time.monotonic() < end, got
                await asyncio.sleep(0.05)
            acked = await send(client.session, "tasks/cancel", {"taskId": created.task_id})
            synced = await client.call_tool("sync_sources", {})  # a sync is a task too: resolved by polling
            after = await send(client.session, "tasks/get", {"taskId": created.task_id})
            return got, acked, after, json.loads(synced.content[0].text)  # type: ignore[union-attr]

    with served(transport, config, tmp_path) as server:
        got, acked, after, report = asyncio.run(run(server))
    assert got["status"] == "working" and acked["resultType"] == "complete", (got, acked)
    assert after["status"] == "cancelled" and "result" not in after, after
    assert 0 < report["unchanged"] < NOTES and report["unchanged"] + report["new"] == NOTES, report
