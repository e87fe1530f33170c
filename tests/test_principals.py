"""Issue 47, phase 1, in process: principals and grants from parameter.yaml and the tokens file (hashed,
several per principal for rotation, plain tokens of the old kind with every scope), each tool's scope
from its declared effects (one function), tools/list and calls per principal through a real MCP client
in memory, collections refused by name, and the audit line of each write; documents by URI
(resources/read) under the same read check, over real HTTP with static tokens and on stdio's path. OAuth
and the HTTP servers: tests/test_oauth.py."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import io
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BIN, copy_built
from fastmcp import Client
from retriever.api import grants
from retriever.api.registry import TOOLS
from retriever.api.tool import Effects, scope_of
from retriever.config import validate_config
from retriever.errors import ConfigError
from retriever.mcp.server import build_server
from retriever.security import principals as p
from retriever.security.principals import PRINCIPAL, Principal
from retriever.testing.net import free_port, wait_http
from retriever.testing.projects import engine_for

TOKEN_OLD, TOKEN_NEW, PLAIN = "tok-rot-old-4f1c9a", "tok-rot-new-8b2e7d", "tok-plain-3c5a11"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def http(**section: Any) -> Any:
    return validate_config({"security": {"http": section}}, source="parameter.yaml")


# ---- configuration --------------------------------------------------------------------------------

@pytest.mark.parametrize(("section", "said"), [
    pytest.param({"principals": [{"name": "ci", "token_sha256": [PLAIN]}]}, "64 lower-case hex digits", id="plain-in-hash"),
    pytest.param({"principals": [{"name": "ci", "scopes": ["wrte"]}]}, "'read', 'write' or 'admin'", id="scope"),
    pytest.param({"principals": [{"name": "ci"}, {"name": "ci"}]}, "'ci' is used twice", id="twice"),
    pytest.param({"principals": [{"name": "ci", "colour": 1}]}, "valid keys here: name, scopes, read, write, groups, token_sha256",
                 id="unknown-key"),
    pytest.param({"principals": [{"name": "ci", "write": ["a/b"]}]}, "collection pattern", id="pattern"),
    pytest.param({"oauth": {"issuer": "http://login.example.com", "resource": "https://s/mcp"}}, "https", id="http-issuer"),
    pytest.param({"oauth": {"issuer": "https://i", "resource": "https://s/mcp", "algorithms": ["HS256"]}}, "RS256",
                 id="hs256"),
    pytest.param({"oauth": {"issuer": "https://i", "resource": "https://s/mcp", "grups": {}}}, "valid keys here: issuer",
                 id="oauth-key"),
])
def test_a_wrong_principal_or_oauth_section_is_named(section: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as e:
        http(**section)
    assert said in str(e.value) and "parameter.yaml" in str(e.value)
    assert PLAIN not in str(e.value)


def test_plain_tokens_of_the_environment_keep_every_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVER_HTTP_TOKENS", f"{TOKEN_OLD}, {TOKEN_NEW}")
    table = p.load_table(http())
    old, new = table.find(TOKEN_OLD), table.find(TOKEN_NEW)
    assert old is not None and new is not None and old.unrestricted and new.unrestricted
    assert old.caller != new.caller  # two plain tokens: two callers, as before
    assert table.find("tok-wrong") is None and table.find("") is None
    assert all(TOKEN_OLD not in d for d in table.by_digest)  # kept as digests only


def test_a_hashed_token_names_its_principal_in_the_yaml_and_the_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RETRIEVER_HTTP_TOKENS", raising=False)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# the indexer's new token\nsha256:{sha(TOKEN_NEW)} indexer\n{PLAIN}\nsha256:{sha('x-any')}\n")
    cfg = http(tokens_file=str(tokens), principals=[{"name": "indexer", "scopes": ["read", "write"], "write": ["docs_*"],
                                                     "groups": ["eng"], "token_sha256": [sha(TOKEN_OLD)]}])
    table = p.load_table(cfg)
    old, new = table.find(TOKEN_OLD), table.find(TOKEN_NEW)
    assert old == new and old is not None and old.name == "indexer" and old.groups == ("eng",)
    assert old.may("write", "docs_2024") and not old.may("write", "default") and old.may("read", "")
    assert not old.has("admin")
    assert table.find(PLAIN).unrestricted and table.find("x-any").unrestricted  # type: ignore[union-attr]


@pytest.mark.parametrize(("line", "said"), [
    pytest.param(f"sha256:{sha(TOKEN_OLD)} nobody", "no principal named 'nobody'", id="unknown-principal"),
    pytest.param(f"sha256:{TOKEN_OLD}", "64 lower-case hex digits", id="not-hex"),
])
def test_a_bad_line_of_the_tokens_file_is_named_without_quoting_it(tmp_path: Path, line: str, said: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RETRIEVER_HTTP_TOKENS", raising=False)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{PLAIN}\n{line}\n")
    with pytest.raises(ConfigError) as e:
        p.load_table(http(tokens_file=str(tokens)))
    assert said in str(e.value) and "entry 2" in str(e.value)
    assert TOKEN_OLD not in str(e.value) and PLAIN not in str(e.value)


def test_rotation_in_the_tokens_file_needs_no_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old and new are both valid until the old line is removed; a file that no longer reads keeps the last table."""
    monkeypatch.delenv("RETRIEVER_HTTP_TOKENS", raising=False)
    monkeypatch.setattr(p, "RELOAD_EVERY", 0.0)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"sha256:{sha(TOKEN_OLD)} ci\n")
    static = p.StaticTokens(http(tokens_file=str(tokens), principals=[{"name": "ci", "scopes": ["read"]}]))
    assert static.find(TOKEN_OLD) is not None and static.find(TOKEN_NEW) is None
    tokens.write_text(f"sha256:{sha(TOKEN_OLD)} ci\nsha256:{sha(TOKEN_NEW)} ci\n")
    assert static.find(TOKEN_OLD) == static.find(TOKEN_NEW) != None  # noqa: E711
    tokens.write_text(f"sha256:{sha(TOKEN_NEW)} ci\n")
    assert static.find(TOKEN_OLD) is None and static.find(TOKEN_NEW) is not None
    tokens.write_text(f"sha256:{sha(TOKEN_NEW)} ghost\n")  # a bad edit: the last good table stays
    assert static.find(TOKEN_NEW) is not None


# ---- each tool's scope comes from its effects ---------------------------------------------------

def expected_scope(e: Effects) -> str:
    """The rule docs/security.md states, written here again (not imported): a read-only tool needs read;
    one that changes what every caller is served (the session, a whole index, files) admin; any other
    write, write."""
    return "read" if e.read_only else "admin" if e.operator else "write"


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
def test_each_tool_s_scope_is_its_effects_and_the_faces_use_it(tool: Any) -> None:
    assert tool.scope == expected_scope(tool.effects) == scope_of(tool.effects)
    for scope in ("read", "write", "admin"):  # what a principal of one scope is shown and allowed
        one = Principal("one", frozenset({scope}))
        assert (tool.name in grants.listed(one, TOOLS)) == (scope == expected_scope(tool.effects))
        assert (grants.scope_refusal(one, tool) is None) == (scope == expected_scope(tool.effects))


def test_the_scope_table_of_the_docs_is_the_registry_s() -> None:
    from retriever.api.reference import SECURITY_PAGE, scopes_markdown, section

    assert section(SECURITY_PAGE.read_text(), "scopes") == scopes_markdown(), "run .venv/bin/python -m retriever.api.reference"


# ---- tools/list and calls per principal, through a real MCP client in memory ------------------

READER = Principal("reader", frozenset({"read"}), read=("default",), write=())
WRITER_B = Principal("writer-b", frozenset({"read", "write"}), read=("*",), write=("b",))
WRITER = Principal("writer", frozenset({"read", "write"}), read=("*",), write=("default",))


def as_principal(principal: Principal, work: Any) -> Any:
    """`work()` (a coroutine function) run as `principal`, as the HTTP guard sets it for a request."""
    ctx = contextvars.copy_context()
    ctx.run(PRINCIPAL.set, principal)
    return ctx.run(asyncio.run, work())


@pytest.fixture(scope="module")
def server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    engine = engine_for(copy_built(built_project, tmp_path_factory.mktemp("grants") / "p"))
    engine.init()
    (engine.base_config.collections_path / "b").mkdir(parents=True)  # a second collection, empty
    yield build_server(engine, profile="full")


def call(server: Any, principal: Principal, tool: str, args: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, args, raise_on_error=False)

    return as_principal(principal, run)


@pytest.mark.parametrize("principal", [READER, WRITER, p.OPERATOR], ids=["reader", "writer", "operator"])
def test_tools_list_shows_a_principal_only_what_it_may_call(server: Any, principal: Principal) -> None:
    async def names() -> set[str]:
        async with Client(server) as client:
            return {t.name for t in await client.list_tools()}

    listed = as_principal(principal, names)
    served = set(server._tool_manager._tools) if hasattr(server, "_tool_manager") else None
    everything = as_principal(p.OPERATOR, names)
    assert served is None or everything <= served
    assert listed == {n for n in everything if next(t for t in TOOLS if t.name == n).scope in principal.scopes}
    if principal is READER:
        assert "search" in listed and not listed & {"add_documents", "retriever_delete", "retriever_init", "bm25_index"}


def test_a_call_without_the_scope_is_refused_naming_it(server: Any) -> None:
    result = call(server, READER, "add_documents", {"documents": [{"id": "r1", "contents": "not by a reader"}]})
    assert result.is_error and "add_documents needs the scope 'write'" in result.content[0].text
    assert "reader" in result.content[0].text


def test_a_writer_of_another_collection_cannot_write_this_one(server: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="retriever.audit")
    refused = call(server, WRITER_B, "add_documents", {"documents": [{"id": "w1", "contents": "from b"}]})
    assert refused.is_error and "may not write the collection 'default'" in refused.content[0].text
    done = call(server, WRITER, "add_documents", {"documents": [{"id": "w2", "contents": "quartz lagoon notes"}]})
    assert not done.is_error, done.content[0].text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "retriever.audit"]
    assert {"principal": "writer-b", "tool": "add_documents", "collections": ["default"], "outcome": "refused"}.items() \
        <= lines[0].items()
    assert lines[1]["principal"] == "writer" and lines[1]["outcome"] == "done" and lines[1]["added"] == 1
    assert "quartz" not in caplog.text  # counts, never texts


@pytest.mark.parametrize(("tool", "args", "named"), [
    pytest.param("search", {"query": "earthquakes", "collection": "b"}, "'b'", id="search-b"),
    pytest.param("retriever_fanout_search", {"query_list": ["earthquakes"], "collections": ["", "b"]}, "'b'", id="fanout"),
    pytest.param("get_document", {"ids": ["x"], "collection": "secret_1"}, "'secret_1'", id="get-document"),
])
def test_a_collection_without_a_read_grant_is_refused_by_name(server: Any, tool: str, args: dict[str, Any],
                                                                named: str) -> None:
    result = call(server, READER, tool, args)
    assert result.is_error and f"may not read the collection {named}" in result.content[0].text
    allowed = call(server, READER, "search", {"query": "earthquakes"})
    assert not allowed.is_error, allowed.content[0].text


@pytest.mark.parametrize("tool", ["list_collections", "retriever_list_collections"])
def test_a_listing_of_collections_names_only_those_it_may_read(server: Any, tool: str) -> None:
    everything = call(server, p.OPERATOR, tool, {})
    mine = call(server, READER, tool, {})
    assert [c["name"] for c in json.loads(everything.content[0].text)["collections"]] == ["", "b"]
    assert [c["name"] for c in json.loads(mine.content[0].text)["collections"]] == [""]


# ---- documents by URI (resources/read): the read scope and a read grant, as the read tools ----------

DOC = "retriever://documents/doc00"  # the sample corpus's first document
DOC_TEXT = "Photosynthesis"
WRITE_ONLY = Principal("writer-only", frozenset({"write"}), read=("*",), write=("*",))
OUTSIDER = Principal("outsider", frozenset({"read"}), read=("b",), write=())
REFUSED_READS = {"writer-only": "resources/read needs the scope 'read'",
                 "outsider": "resources/read: outsider may not read the collection 'default'"}
URI_TOKENS = {"reader": "tok-res-reader-2b7f", "writer-only": "tok-res-writer-6e0d", "outsider": "tok-res-outsider-81c4"}


@contextlib.contextmanager
def serving_http(config: Path, log: Path) -> Iterator[str]:
    """`retriever serve --transport http` (every tool) of `config` on 127.0.0.1, with the principals its
    YAML hashes and no RETRIEVER_HTTP_TOKENS: its MCP URL, the server stopped on leaving."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RETRIEVER_HTTP_TOKENS"}
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(config), "--port", str(port),
                             "--transport", "http", "--tools", "full", "--init"], stderr=log.open("w"), env=env)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        wait_http(url, proc, lambda: log.read_text()[-3000:], any_status=True)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def test_over_http_a_document_by_uri_needs_the_read_scope_and_grant(built_project: Path, tmp_path: Path) -> None:
    """`retriever serve --transport http` with static tokens: a reader reads retriever://documents/doc00 and
    is shown the template; a write-only token and a reader of another collection are refused, by the scope
    and by the collection, and are not shown the template."""
    config = copy_built(built_project, tmp_path / "p")
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("security", {}).setdefault("http", {})["principals"] = [
        {"name": "reader", "scopes": ["read"], "read": ["*"], "token_sha256": [sha(URI_TOKENS["reader"])]},
        {"name": "writer-only", "scopes": ["write"], "write": ["*"], "token_sha256": [sha(URI_TOKENS["writer-only"])]},
        {"name": "outsider", "scopes": ["read"], "read": ["b"], "token_sha256": [sha(URI_TOKENS["outsider"])]}]
    config.write_text(yaml.safe_dump(cfg))
    with serving_http(config, tmp_path / "serve.log") as url:
        got = {who: asyncio.run(_resources(url, token)) for who, token in URI_TOKENS.items()}
    assert DOC_TEXT in got["reader"]["read"] and got["reader"]["templates"] == ["retriever://documents/{id}"]
    for who, said in REFUSED_READS.items():
        assert said in got[who]["read"] and DOC_TEXT not in got[who]["read"], (who, got[who])
        assert got[who]["templates"] == [], who


async def _resources(url: str, token: str) -> dict[str, Any]:
    import httpx2
    from mcp.client.client import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            SDKClient(streamable_http_client(url, http_client=http)) as client:
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        try:
            read = " ".join(getattr(c, "text", "") for c in (await client.read_resource(DOC)).contents)
        except MCPError as e:
            read = f"error: {e}"
        return {"templates": templates, "read": read}


@pytest.mark.parametrize("principal", [READER, WRITE_ONLY, OUTSIDER], ids=lambda p: p.name)
def test_stdio_reads_a_document_by_uri_under_the_same_check(server: Any, principal: Principal) -> None:
    """The stdio server's resources/read and templates/list (its caller is the operator; a principal set
    as the HTTP guard sets one gets the same answers as over HTTP)."""
    from retriever.mcp.core import served_tools
    from retriever.mcp.stdio import ProtocolError, StdioServer

    stdio = StdioServer(server.engine, served_tools(server.engine, profile="full"), io.BytesIO())
    ctx = contextvars.copy_context()
    ctx.run(PRINCIPAL.set, principal)
    templates = ctx.run(stdio.answer, "resources/templates/list", {})["resourceTemplates"]
    if principal is READER:
        assert DOC_TEXT in ctx.run(stdio.answer, "resources/read", {"uri": DOC})["contents"][0]["text"]
        assert [t["uriTemplate"] for t in templates] == ["retriever://documents/{id}"]
        return
    with pytest.raises(ProtocolError, match=REFUSED_READS[principal.name]):
        ctx.run(stdio.answer, "resources/read", {"uri": DOC})
    assert templates == []


# ---- the audit line of a write refused for its scope (before its arguments are read) ----------------

@pytest.mark.parametrize(("principal", "tool", "args", "collections", "scope"), [
    pytest.param(READER, "add_documents", {"documents": [{"id": "r3", "contents": "quartz refused words"}]},
                 ["default"], "write", id="reader-adds"),
    pytest.param(READER, "retriever_delete", {"ids": ["doc00"]}, ["default"], "write", id="reader-deletes"),
    pytest.param(WRITER, "retriever_index", {"collection_name": "b"}, ["b"], "admin", id="writer-rebuilds-b"),
])
def test_a_write_refused_for_its_scope_is_audited(server: Any, caplog: pytest.LogCaptureFixture, principal: Principal,
                                                  tool: str, args: dict[str, Any], collections: list[str],
                                                  scope: str) -> None:
    caplog.set_level(logging.INFO, logger="retriever.audit")
    result = call(server, principal, tool, args)
    assert result.is_error and f"{tool} needs the scope {scope!r}" in result.content[0].text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "retriever.audit"]
    assert lines == [{"principal": principal.name, "source": "token", "tool": tool, "collections": collections,
                      "outcome": "refused"}]
    assert "quartz" not in caplog.text  # never a text of the call


# ---- MCP over HTTP: a call outside the caller's scopes is a 403 scope challenge -----------------------

CHALLENGED = {"reader": "tok-ch-reader-5d1e07", "writer": "tok-ch-writer-9a3b42"}
PROTOCOL = "2025-11-25"  # the revision whose authorization spec asks for the challenge
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def challenged(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`retriever serve --transport http` with static hashed tokens only (no OAuth): a reader (read, of the
    default collection) and a writer (read; write on the default collection). Its MCP URL and its log."""
    folder = tmp_path_factory.mktemp("challenge")
    config = copy_built(built_project, folder / "p")
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("security", {}).setdefault("http", {})["principals"] = [
        {"name": "reader", "scopes": ["read"], "read": ["default"], "token_sha256": [sha(CHALLENGED["reader"])]},
        {"name": "writer", "scopes": ["read", "write"], "read": ["*"], "write": ["default"],
         "token_sha256": [sha(CHALLENGED["writer"])]}]
    config.write_text(yaml.safe_dump(cfg))
    with serving_http(config, folder / "serve.log") as url:
        yield url, folder / "serve.log"


def mcp_posts(url: str, token: str, *messages: dict[str, Any]) -> list[Any]:
    """Raw JSON-RPC over streamable HTTP: initialize, notifications/initialized, then each of `messages` in
    that session; their httpx responses."""
    import httpx

    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    with httpx.Client(headers={"Authorization": f"Bearer {token}", **ACCEPT}, timeout=30) as http:
        opened = http.post(url, json=init)
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        assert http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                         headers=session).status_code == 202
        return [http.post(url, json=m, headers=session) for m in messages]


def tools_call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def audit_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line.split("retriever.audit: ", 1)[1]) for line in log.read_text().splitlines()
            if "retriever.audit: " in line]


@pytest.mark.parametrize(("tool", "args", "scope"), [
    pytest.param("add_documents", {"documents": [{"id": "c1", "contents": "quartz challenge words"}]}, "write",
                 id="write"),
    pytest.param("retriever_init", {}, "admin", id="admin"),
])
def test_over_http_a_call_outside_the_scopes_is_a_403_challenge(challenged: tuple[str, Path], tool: str,
                                                                 args: dict[str, Any], scope: str) -> None:
    """RFC 6750's insufficient_scope with the exact scope the tool needs (no resource_metadata: no OAuth here),
    a JSON-RPC error with the request's id in the body; a write so refused is audited once; the session goes on."""
    url, log = challenged
    before = len(audit_lines(log))
    refused, searched = mcp_posts(url, CHALLENGED["reader"], tools_call(7, tool, args),
                                  tools_call(8, "search", {"query": "earthquakes", "top_k": 1}))
    assert refused.status_code == 403, refused.text
    assert refused.headers["www-authenticate"] == f'Bearer realm="retriever", error="insufficient_scope", scope="{scope}"'
    error = refused.json()
    assert error["id"] == 7 and f"{tool} needs the scope {scope!r}; this caller (reader) has: read" in error["error"]["message"]
    assert searched.status_code == 200 and '"isError":false' in searched.text.replace(" ", "")
    audited = audit_lines(log)[before:]
    assert [(a["principal"], a["tool"], a["outcome"]) for a in audited] == (
        [("reader", tool, "refused")])
    assert "quartz" not in log.read_text() and CHALLENGED["reader"] not in log.read_text()


def test_over_http_a_grant_refusal_stays_a_tool_error(challenged: tuple[str, Path]) -> None:
    """The reader has the scope; its grants do not reach collection b: that depends on the arguments, so it is a
    tool error in a 200 answer, as before."""
    url, _ = challenged
    (answer,) = mcp_posts(url, CHALLENGED["reader"], tools_call(3, "search", {"query": "earthquakes", "collection": "b"}))
    assert answer.status_code == 200 and "www-authenticate" not in answer.headers
    assert '"isError":true' in answer.text.replace(" ", "") and "reader may not read the collection 'b'" in answer.text


async def _sdk_session(url: str, token: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The official MCP client with a bearer token: its tools/list, then each call's outcome (its text, or the
    exception the client raised: type and message), each bounded in time."""
    import httpx2
    from mcp.client.client import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http, \
            SDKClient(streamable_http_client(url, http_client=http)) as client:
        names = {t.name for t in (await asyncio.wait_for(client.list_tools(), 30)).tools}
        outcomes: list[dict[str, Any]] = []
        for name, arguments in calls:
            try:
                result = await asyncio.wait_for(client.call_tool(name, arguments), 30)
            except TimeoutError:
                outcomes.append({"raised": "timeout"})
                continue
            except Exception as e:  # noqa: BLE001 - what the client raises is the finding
                outcomes.append({"raised": type(e).__name__, "text": str(e)})
                continue
            outcomes.append({"error": result.is_error, "text": "".join(getattr(c, "text", "") for c in result.content)})
        return {"tools": names, "calls": outcomes}


def test_the_official_client_raises_on_the_challenge_and_goes_on(challenged: tuple[str, Path]) -> None:
    """mcp's client with a plain bearer token (no OAuth provider to step up with) raises MCPError carrying the
    refusal at once (no hang, no retry), and the session serves the next call; the reader's tools/list is as
    before; the writer's write succeeds."""
    url, _ = challenged
    doc = {"documents": [{"id": "c3", "contents": "Basalt ledger of the challenge"}]}
    reader = asyncio.run(_sdk_session(url, CHALLENGED["reader"], ("add_documents", doc), ("search", {"query": "basalt"})))
    assert reader["calls"][0]["raised"] == "MCPError", reader["calls"][0]
    assert "add_documents needs the scope 'write'" in reader["calls"][0]["text"]
    assert reader["calls"][1]["error"] is False
    assert "search" in reader["tools"] and not reader["tools"] & {"add_documents", "retriever_init"}
    writer = asyncio.run(_sdk_session(url, CHALLENGED["writer"], ("add_documents", doc), ("delete_documents", {"ids": ["c3"]})))
    assert [c.get("error") for c in writer["calls"]] == [False, False], writer["calls"]
    assert json.loads(writer["calls"][0]["text"])["added"] == 1


# ---- the audit line of a write whose arguments do not validate (nothing of it ran) -------------------

NAN = float("nan")


INVALID = [
    pytest.param(WRITER, "add_documents", {"documents": ["quartz: an item that is not an object"]}, ["default"],
                 id="an-item-not-an-object"),
    pytest.param(WRITER, "add_documents", {"documents": "quartz, not a list"}, ["default"], id="documents-not-a-list"),
    pytest.param(p.OPERATOR, "retriever_index", {"collection_name": "b", "overwrite": "quartz"}, ["b"],
                 id="operator-rebuilds-b-wrongly"),
]
NAN_ITEM = {"documents": [{"id": "v3", "contents": "quartz", "metadata": {"x": NAN}}]}  # over JSON: HTTP below


@pytest.mark.parametrize(("face", "principal", "tool", "args", "collections"), [
    *[pytest.param("fastmcp", *c.values, id=f"fastmcp-{c.id}") for c in INVALID],
    *[pytest.param("stdio", *c.values, id=f"stdio-{c.id}") for c in INVALID],
    pytest.param("stdio", WRITER, "add_documents", NAN_ITEM, ["default"], id="stdio-nan-in-metadata"),
])
def test_a_write_whose_arguments_do_not_validate_is_audited(server: Any, caplog: pytest.LogCaptureFixture, face: str,
                                                           principal: Principal, tool: str, args: dict[str, Any],
                                                           collections: list[str]) -> None:
    """Through FastMCP's gate (in memory, as over HTTP) and stdio's (Gate.request): one audit line, outcome
    `invalid arguments`, the collections read from the raw arguments, never a text of the call. (NaN in memory:
    FastMCP's client sends it as null; over HTTP in the next test.)"""
    from retriever.mcp.core import served_tools
    from retriever.mcp.stdio import StdioServer

    caplog.set_level(logging.INFO, logger="retriever.audit")
    if face == "fastmcp":
        result = call(server, principal, tool, args)
        failed, text = result.is_error, result.content[0].text
    else:
        stdio = StdioServer(server.engine, served_tools(server.engine, profile="full"), io.BytesIO())
        answer = as_principal(principal, lambda: stdio.result(1, tool, args))
        failed, text = answer["isError"], answer["content"][0]["text"]
    assert failed and "invalid arguments" in text, text
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "retriever.audit"]
    assert lines == [{"principal": principal.name, "source": principal.source, "tool": tool, "collections": collections,
                      "outcome": "invalid arguments"}]
    assert "quartz" not in caplog.text


@pytest.mark.parametrize(("tool", "args", "outcome"), [
    pytest.param("search", {"query": 5}, None, id="a-read-is-not-audited"),
    pytest.param("retriever_delete", {}, "failed", id="a-write-its-engine-refuses-is-audited-once-as-failed"),
])
def test_only_writes_are_audited_and_each_once(server: Any, caplog: pytest.LogCaptureFixture, tool: str,
                                               args: dict[str, Any], outcome: str | None) -> None:
    """A read whose arguments do not validate leaves no line; a write that validates and then fails in the
    engine (retriever_delete without ids or filters: InvalidInputError inside serve_call) one, `failed`, not
    also `invalid arguments`."""
    caplog.set_level(logging.INFO, logger="retriever.audit")
    result = call(server, WRITER, tool, args)
    assert result.is_error
    lines = [json.loads(r.getMessage())["outcome"] for r in caplog.records if r.name == "retriever.audit"]
    assert lines == ([] if outcome is None else [outcome])


@pytest.mark.parametrize("body", [
    pytest.param('{"documents": [{"id": "v4", "contents": "quartz", "metadata": {"x": NaN}}]}', id="nan-in-metadata"),
    pytest.param('{"documents": [17]}', id="an-item-not-an-object"),
])
def test_over_http_a_write_whose_arguments_do_not_validate_is_audited(challenged: tuple[str, Path], body: str) -> None:
    """A real `serve --transport http` (FastMCP's validation, and Request.check_finite in the tool's body for the
    raw NaN): a tool error, and one audit line `invalid arguments` in the server's log, without the text."""
    import httpx

    url, log = challenged
    before = len(audit_lines(log))
    raw = '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "add_documents", "arguments": ' \
          + body + "}}"
    (answer,) = mcp_posts(url, CHALLENGED["writer"], {"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert answer.status_code == 200
    session = {"mcp-session-id": answer.request.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    sent = httpx.post(url, content=raw.encode(), timeout=30, headers={
        "Authorization": f"Bearer {CHALLENGED['writer']}", "Content-Type": "application/json", **ACCEPT, **session})
    assert sent.status_code == 200 and '"isError":true' in sent.text and "invalid arguments" in sent.text, sent.text
    assert [(a["principal"], a["tool"], a["collections"], a["outcome"]) for a in audit_lines(log)[before:]] == [
        ("writer", "add_documents", ["default"], "invalid arguments")]
    assert "quartz" not in log.read_text()
