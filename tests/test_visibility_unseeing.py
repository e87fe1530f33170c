"""Issue 47: what cannot apply document visibility (api/grants.py UNSEEING: a graph of triples, a
deployed retriever elsewhere, the YAML's source folders; and retriever_ingest of a folder) for a caller
that sees only some documents. It is left out of such a caller's tools/list (tools/list shows a
principal only what it may call) and a call of it is refused with a message naming
security.visibility, through a real MCP client in memory, as the HTTP guard sets the principal.
The visibility project, the principals and the helpers are tests/test_visibility.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from retriever.api.grants import UNSEEING
from retriever.mcp.server import build_server
from retriever.security.principals import OPERATOR, Principal
from retriever.testing.projects import engine_for
from test_visibility import ONE, READER, WRITER, listed, reply, visibility_project

ADMIN = Principal("admin", frozenset({"read", "write", "admin"}), groups=("eng",))  # sees every document


@pytest.fixture(scope="module")
def server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The visibility project with what those tools need to be served: an llm section, a retriever_url
    and a source folder (nothing is sent to the first two here: the calls are refused before)."""
    config = visibility_project(built_project, tmp_path_factory.mktemp("unseeing") / "p")
    (config.parent / "folder").mkdir()
    (config.parent / "folder" / "note.md").write_text("# Note\n\nzebrafinch field notes\n")
    engine = engine_for(config, {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
                                 "retriever_url": "http://127.0.0.1:9", "sources": [{"path": "folder"}]})
    engine.init()
    return build_server(engine, profile="full")


def test_tools_list_leaves_out_what_visibility_refuses_a_restricted_caller(server: Any) -> None:
    unseeing = set(UNSEEING)
    assert unseeing <= listed(server, OPERATOR) and unseeing <= listed(server, ADMIN)
    reader, writer = listed(server, READER), listed(server, WRITER)
    assert not (reader | writer) & unseeing, (reader | writer) & unseeing
    assert {"search", "get_document"} <= reader and {"retriever_add", "retriever_ingest"} <= writer


@pytest.mark.parametrize(("tool", "args", "what", "why"), [
    pytest.param("retriever_extract_triples", {}, "retriever_extract_triples", "into a graph every caller",
                 id="extract-triples"),
    pytest.param("retriever_ingest", {"path": "folder"}, "retriever_ingest of a folder", "a folder's files carry no",
                 id="ingest-folder"),
    pytest.param("retriever_deploy_search", ONE, "retriever_deploy_search", "answers as this server's operator",
                 id="deploy-search"),
    pytest.param("sync_sources", {}, "sync_sources", "writes the YAML's folders as they are", id="sync-sources"),
])
def test_a_call_that_cannot_apply_visibility_is_refused_to_a_restricted_caller(server: Any, tool: str,
                                                                              args: dict[str, Any], what: str,
                                                                              why: str) -> None:
    text = reply(server, WRITER, tool, args)
    assert f"{what}: security.visibility is on and this caller (writer) sees only some documents" in text, text
    assert why in text and "a principal with the admin scope may call it" in text
