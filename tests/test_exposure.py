"""What a server shows or leaves behind (issue 31): /readyz without paths, read-only serving and
`retriever deploy` write no calibration file, and errors a tool call gets name paths relative to
the YAML's folder (or by key and file name), never the server's absolute folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import MCP, copy_built
from retriever.mcp.server import build_server
from retriever.testing.projects import engine_for
from test_deploy import Deploy


def _fresh_copy(built_project: Path, dest: Path) -> Path:
    """A private copy of the built project with no calibration measured yet."""
    config = copy_built(built_project, dest)
    for stale in config.parent.rglob("*.calibration.json"):
        stale.unlink()
    return config


@pytest.fixture(scope="module")
def deployed(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Deploy, Path]]:
    config = _fresh_copy(built_project, tmp_path_factory.mktemp("exposure") / "p")
    d = Deploy(config, config.parent)
    yield d, config
    d.stop()


def test_readyz_names_no_path(deployed: tuple[Deploy, Path]) -> None:
    service, config = deployed
    r = httpx.get(f"{service.url}/readyz", timeout=30)  # no token: open by design
    assert r.status_code == 200 and r.json()["status"] == "ready"
    assert str(config.parent) not in r.text and "corpus.jsonl" not in r.text, r.text


def test_deploy_measures_the_calibration_but_writes_no_file(deployed: tuple[Deploy, Path]) -> None:
    service, config = deployed
    got = service.search(query_list=["what is BM25?"], top_k=3, mode="hybrid")  # vector_weight auto: calibrated
    assert len(got["ret_ids"][0]) == 3
    assert not list(config.parent.rglob("*.calibration.json"))


def test_read_only_serving_measures_the_calibration_but_writes_no_file(built_project: Path, tmp_path: Path) -> None:
    config = _fresh_copy(built_project, tmp_path / "p")
    engine = engine_for(config)
    engine.init()  # `serve --init --read-only`: the session opens before the server is built
    client = MCP(engine)
    client.server = build_server(engine, read_only=True, profile="full")  # what `serve --read-only` builds
    got = client.ok("retriever_hybrid_search", {"query_list": ["what is BM25?"], "top_k": 3})
    assert len(got["ret_psg"][0]) == 3
    assert not list(config.parent.rglob("*.calibration.json"))


@pytest.fixture
def project_copy(built_project: Path, tmp_path: Path) -> Path:
    return copy_built(built_project, tmp_path / "p")


@pytest.mark.parametrize(("tool", "args"), [
    pytest.param("retriever_init", {"corpus_path": "../elsewhere/secrets.jsonl"}, id="corpus-outside-the-roots"),
    pytest.param("retriever_init", {"embedding_path": "../elsewhere/vectors.npy"}, id="embedding-outside-the-roots"),
    pytest.param("retriever_index", {}, id="faiss-index-exists"),
    pytest.param("bm25_index", {}, id="bm25-index-exists"),
    pytest.param("retriever_embed", {}, id="embedding-exists"),
])
def test_path_errors_do_not_show_the_server_folders(project_copy: Path, tool: str, args: dict) -> None:
    elsewhere = project_copy.parent.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secrets.jsonl").write_text('{"id": "k", "contents": "x"}\n')
    engine = engine_for(project_copy)
    engine.init()
    text = MCP(engine).error(tool, args)
    assert str(project_copy.parent.parent) not in text, text  # neither the YAML's folder nor its parent
    assert "exists" in text or "outside" in text, text


def test_a_write_left_out_takes_its_twin_of_the_other_face() -> None:
    """`--tools full,-retriever_delete` used to list `delete_documents` still: deleting stayed open."""
    from retriever.api.registry import selected
    from retriever.main import parse_tools

    profile, include, exclude = parse_tools("full,-retriever_delete,-add_documents")
    names = {t.name for t in selected(profile, include or (), exclude or ())}
    assert not names & {"retriever_delete", "delete_documents", "add_documents", "retriever_add"}
    assert {"retriever_ingest", "ingest_document", "search", "retriever_search"} <= names  # the rest stays
    assert "search" in {t.name for t in selected("full", (), ("retriever_search",))}  # reads keep their twin
