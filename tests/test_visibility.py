"""Issue 47, phase 2: document-level visibility (security.visibility, security/visibility.py).

A hidden document (acl: [hr]) is planted as the best match of the query, with a hidden neighbour
chunk and a hidden auto-merge parent (PLANTED). tests/test_visibility_every_tool.py calls every read
tool of the registry on it, in each profile and mode, with arguments drawn from each tool's schema (a
property test); CASES here are fixed calls of each read tool that the other faces' tests replay
(test_visibility_held, test_visibility_deploy, test_oauth). Here: a reader's page is the visible
documents' ranking, counts and warnings tell nothing of hidden documents, writes cannot grant groups
the writer lacks, nor touch what it cannot see. One test runs over real HTTP: `retriever serve
--transport http` with two static tokens."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_built
from fastmcp import Client
from retriever.mcp.server import build_server
from retriever.security.principals import OPERATOR, Principal
from retriever.testing.projects import engine_for
from test_principals import as_principal, serving_http

MARK = ("qq7hidden", "mauvelemur")  # in every hidden document's text and metadata
Q = "zebrafinch migration at dawn"
READER = Principal("reader", frozenset({"read"}), groups=("eng",))
HR = Principal("hr", frozenset({"read"}), groups=("hr",))
WRITER = Principal("writer", frozenset({"read", "write"}), groups=("eng",))
PLANTED = [
    {"id": "hb-1", "contents": f"{Q}. The zebrafinch migration at dawn, qq7hidden.", "acl": ["hr"],
     "tag": "mauvelemur"},
    {"id": "open-zebra", "contents": "zebrafinch songs at dusk", "acl": "*"},
    {"id": "pub:0", "contents": "zebrafinch migration notes, first part", "acl": "*", "source_id": "pub",
     "split_id": 0, "start": 0},
    {"id": "pub:1", "contents": "qq7hidden second part of the notes", "acl": ["hr"], "source_id": "pub", "split_id": 1,
     "start": 40, "tag": "mauvelemur"},
    {"id": "par-x", "contents": "qq7hidden parent of two kids", "acl": "hr", "children_ids": ["kid:a", "kid:b"],
     "tag": "mauvelemur"},
    {"id": "kid:a", "contents": "zebrafinch migration at dawn, kid a", "acl": "*", "parent_id": "par-x"},
    {"id": "kid:b", "contents": "zebrafinch migration at dawn, kid b", "acl": "*", "parent_id": "par-x"},
]


def visibility_project(built_project: Path, dest: Path) -> Path:
    """A copy of the built sample project with security.visibility on (field acl, missing public: the
    sample corpus has no acl) and the planted documents added by the operator."""
    config = copy_built(built_project, dest)
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("security", {})["visibility"] = {"field": "acl", "missing": "public"}
    config.write_text(yaml.safe_dump(cfg))
    engine = engine_for(config)
    engine.init()
    engine.add(PLANTED)
    return config


@pytest.fixture(scope="module")
def server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    engine = engine_for(visibility_project(built_project, tmp_path_factory.mktemp("vis") / "p"))
    engine.init()
    yield build_server(engine, profile="full")


def reply(server: Any, principal: Principal, tool: str, args: dict[str, Any]) -> str:
    """The whole reply (text and structured content, or the error) as one string."""
    async def run() -> str:
        async with Client(server) as client:
            result = await client.call_tool(tool, args, raise_on_error=False)
            text = "".join(getattr(c, "text", "") for c in result.content)
            return text + json.dumps(result.structured_content or {})

    return as_principal(principal, run)


def listed(server: Any, principal: Principal) -> set[str]:
    async def run() -> set[str]:
        async with Client(server) as client:
            return {t.name for t in await client.list_tools()}

    return as_principal(principal, run)


MODES = ("hybrid", "dense", "bm25")
ONE = {"query_list": [Q], "top_k": 3}
# Per read tool: its calls (each mode and document stage), and whether a member of hr sees the planted
# documents in them (False: the tool reads no documents, or is refused to both).
CASES: dict[str, tuple[list[dict[str, Any]], bool]] = {
    "search": ([{"query": Q, "mode": m, "top_k": 3} for m in MODES] + [{"query": Q, "top_k": 3, "window": 1},
                                                                        {"query": Q, "top_k": 2, "offset": 1}], True),
    "get_document": ([{"ids": ["hb-1", "pub:1", "par-x"]}, {"ids": ["pub"]}, {"ids": ["pub:0"], "around": 1}],
                     True),
    "list_collections": ([{}], False),
    "retriever_list_collections": ([{}], False),
    "retriever_search": ([ONE, {**ONE, "window": 1}, {**ONE, "top_k": 6, "auto_merge": 0.4},
                          {**ONE, "filters": {"field": "meta.tag", "operator": "==", "value": "mauvelemur"}}], True),
    "retriever_batch_search": ([{"batch_query_list": [[Q]], "top_k": 3}], True),
    "retriever_hybrid_search": ([ONE, {**ONE, "fusion": "rrf"}, {**ONE, "window": 1}], True),
    "retriever_hybrid_batch_search": ([{"batch_query_list": [[Q]], "top_k": 3}], True),
    "bm25_search": ([ONE, {**ONE, "top_k": 6, "auto_merge": 0.4}], True),
    "retriever_multi_query_search": ([{"question_list": [[Q, "zebrafinch dawn"]], "top_k": 3, "mode": m}
                                      for m in MODES], True),
    "retriever_fanout_search": ([{"query_list": [Q], "collections": [""], "top_k": 3, "mode": m} for m in MODES], True),
    "retriever_get_neighbors": ([{"id": "pub:0", "after": 1}, {"id": "pub:1"}], True),
    "retriever_project_memory_search": ([{"query_list": [Q], "top_k": 3, "current_user_id": "u"}], False),
    "retriever_deploy_search": ([ONE], False),  # refused under visibility (and no deployed retriever here)
    "retriever_graph_search": ([ONE], False),  # refused under visibility
    "retriever_agentic_search": ([ONE], False),
    "retriever_rewrite_query": ([{"query_list": [Q]}], False),
    "retriever_infer_filters": ([{"query_list": [Q]}], False),
}
WEB = {"web_search", "retriever_exa_search", "retriever_tavily_search", "retriever_zhipuai_search", "retriever_websearch",
       "retriever_batch_websearch"}  # the web's pages, not the collection's documents


def leaks(text: str) -> list[str]:
    return [m for m in MARK if m in text]


def ids_of(text: str) -> list[str]:
    data = json.loads(text[text.index("{"):]) if "{" in text else {}
    hits = data.get("hits") or data.get("results") or []
    return [h["id"] for h in hits]


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_s_page_is_the_visible_documents_ranking(server: Any, mode: str) -> None:
    async def run(principal: Principal, k: int, offset: int = 0) -> Any:
        async with Client(server) as client:
            result = await client.call_tool("retriever_search" if mode == "dense" else
                                            "bm25_search" if mode == "bm25" else "retriever_hybrid_search",
                                            {"query_list": [Q], "top_k": k, "offset": offset, "return_metadata": False},
                                            raise_on_error=False)
            return result.structured_content or json.loads(result.content[0].text)

    operator = as_principal(OPERATOR, lambda: run(OPERATOR, 6))
    reader = as_principal(READER, lambda: run(READER, 3))
    paged = as_principal(READER, lambda: run(READER, 2, offset=1))
    psg = operator["ret_psg"][0]
    assert any("qq7hidden" in t for t in psg[:1]), "the planted document is the operator's best match"
    visible = [t for t in psg if "qq7hidden" not in t]
    assert reader["ret_psg"][0] == visible[:3]  # full page, no hidden row in the ranking
    assert paged["ret_psg"][0] == visible[1:3]  # offsets count visible documents only


def test_counts_and_warnings_tell_nothing_of_hidden_documents(server: Any) -> None:
    listing = reply(server, READER, "retriever_list_collections", {})
    assert '"documents": null' in listing or '"documents":null' in listing
    # a field only a hidden document has: no warning names the collection's fields to a reader
    warned = reply(server, READER, "retriever_search", {**ONE, "filters": {"field": "meta.tag", "operator": "==",
                                                                           "value": "x"}})
    assert "tag" not in warned.split('"ret_psg"')[0] and "warnings" not in warned
    refused = reply(server, READER, "retriever_graph_search", ONE)
    assert "security.visibility" in refused


@pytest.fixture
def writable(built_project: Path, tmp_path: Path) -> Any:
    engine = engine_for(visibility_project(built_project, tmp_path / "p"))
    engine.init()
    return build_server(engine, profile="full")


# A writer of group eng: add_documents' arguments it may not send, and what the refusal says.
UNGRANTED = [
    pytest.param({"documents": [{"id": "n1", "contents": "x", "acl": ["hr"]}]}, "'hr'", id="other-group"),
    pytest.param({"documents": [{"id": "n1", "contents": "x", "acl": "*"}]}, "'*'", id="everyone"),
    pytest.param({"documents": [{"id": "n1", "contents": "x"}]}, "needs the metadata field 'acl'", id="no-field-public"),
    pytest.param({"documents": [{"id": "hb-1", "contents": "x", "acl": ["eng"]}]}, "may not replace",
                 id="replace-hidden"),
]


@pytest.mark.parametrize(("args", "said"), UNGRANTED)
def test_a_writer_cannot_grant_what_it_does_not_hold(writable: Any, args: dict[str, Any], said: str) -> None:
    text = reply(writable, WRITER, "add_documents", args)
    assert said in text and "security.visibility" in text


def test_a_writer_deletes_only_what_it_sees(writable: Any) -> None:
    assert '"added": 1' in reply(writable, WRITER, "retriever_add",
                                 {"documents": [{"id": "mine", "contents": "eng note", "acl": ["eng"]}]})
    gone = json.loads(reply(writable, WRITER, "retriever_delete", {"ids": ["hb-1", "mine"]}).split("}{")[0] + "}")
    assert gone["deleted"] == 1 and gone["not_found"] == ["hb-1"]
    assert "qq7hidden" in reply(writable, HR, "get_document", {"ids": ["hb-1"]})


def test_a_restricted_writer_may_not_sync_the_sources(built_project: Path, tmp_path: Path) -> None:
    """sync_sources writes the YAML's folders without a caller's write checks (the groups it holds,
    the documents it sees): under visibility it is refused to a restricted caller, as the tools
    that cannot apply visibility are (api/grants.py UNSEEING), and allowed to the operator."""
    from retriever.api.grants import unseeing

    engine = engine_for(visibility_project(built_project, tmp_path / "p"))
    engine.init()
    assert "security.visibility is on" in (unseeing(WRITER, "sync_sources", engine) or "")
    assert unseeing(OPERATOR, "sync_sources", engine) is None
    assert unseeing(WRITER, "retriever_add", engine) is None  # its own checks apply (the tests above)


# ---- over real HTTP: two static tokens on `retriever serve --transport http` ----------------------

TOKENS = {"reader": "tok-vis-reader-5d1e", "hr": "tok-vis-hr-9a3c"}


def with_principals(config: Path) -> Path:
    """`config` with two static principals (security.http.principals, hashed): TOKENS' reader of group eng
    and hr of group hr, both with the read scope only (tests/test_visibility_deploy.py uses it too)."""
    cfg = yaml.safe_load(config.read_text())
    cfg["security"].setdefault("http", {})["principals"] = [
        {"name": name, "scopes": ["read"], "groups": [group],
         "token_sha256": [hashlib.sha256(TOKENS[name].encode()).hexdigest()]}
        for name, group in (("reader", "eng"), ("hr", "hr"))]
    config.write_text(yaml.safe_dump(cfg))
    return config


def test_over_http_a_reader_never_gets_the_hidden_document(built_project: Path, tmp_path: Path) -> None:
    config = with_principals(visibility_project(built_project, tmp_path / "p"))
    calls = [("search", {"query": Q, "top_k": 3}), ("retriever_hybrid_search", ONE),
             ("get_document", {"ids": ["hb-1"]}), ("retriever_get_neighbors", {"id": "pub:0", "after": 1})]
    with serving_http(config, tmp_path / "serve.log") as url:
        got = {who: asyncio.run(_session(url, token, calls)) for who, token in TOKENS.items()}
    assert [leaks(t) for t in got["reader"]] == [[], [], [], []]
    assert all(leaks(t) for t in got["hr"])


async def _session(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    import httpx2
    from mcp.client.client import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            SDKClient(streamable_http_client(url, http_client=http)) as client:
        out = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            out.append("".join(getattr(c, "text", "") for c in result.content))
        return out
