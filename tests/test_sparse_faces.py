"""The learned-sparse index from every face that builds indexes (`retriever index --mode sparse`,
the `sparse_index` tool, listed where a sparse model is configured) and its following of the
change log: an add is encoded at add time and published, so a search encodes no document; a
process holding an older copy reads the folder's newer one instead of encoding others' writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MCP
from fastmcp import Client
from retriever import main as cli
from retriever.api.registry import selected
from retriever.search import learned_sparse
from retriever.store.persist import read_manifest
from retriever.testing.projects import engine_for, write_project
from test_sparse import DOCS, QUERIES, brute_force, build_tiny_mlm, check_equal, sparse_engine


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_mlm(tmp_path_factory.mktemp("mlm") / "tiny-mlm")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_index_mode_sparse(tmp_path: Path, tiny_mlm: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import retriever.session

    def refuse(cfg: object) -> None:
        raise AssertionError("an embedding model was loaded")

    monkeypatch.setattr(retriever.session, "build_embedder", refuse)
    config = write_project(tmp_path / "p", sparse={"model_name_or_path": str(tiny_mlm), "save_path": "out/sparse"})
    code, out, err = run(capsys, "index", "--config", str(config), "--mode", "sparse")
    assert code == 0, err
    report = json.loads(out)
    assert report["sparse"]["documents"] == len(DOCS) and "bm25" not in report and "index" not in report
    assert "sparse: 100%|" in err and f"{len(DOCS)}/{len(DOCS)}" in err  # the progress bar, on stderr
    learned_sparse.forget(tmp_path / "p" / "out" / "sparse")
    code, out, err = run(capsys, "search", QUERIES[2], "--config", str(config), "--mode", "sparse", "-k", "4",
                         "--json")
    assert code == 0, err
    texts = {d["id"]: d["contents"] for d in DOCS}
    assert [h["id"] for h in json.loads(out)] == [i for i, _ in brute_force(tiny_mlm, QUERIES[2:], texts, 4)[0]]
    # up to date: not rebuilt (no sparse report); --overwrite rebuilds
    code, out, _ = run(capsys, "index", "--config", str(config), "--mode", "sparse")
    assert code == 0 and "sparse" not in json.loads(out)
    code, out, _ = run(capsys, "index", "--config", str(config), "--mode", "sparse", "--overwrite")
    assert code == 0 and json.loads(out)["sparse"]["documents"] == len(DOCS)


def test_cli_index_mode_sparse_without_a_model_says_what_to_set(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = write_project(tmp_path / "p")
    code, _, err = run(capsys, "index", "--config", str(config), "--mode", "sparse")
    assert code == 2 and "sparse.model_name_or_path" in err


def listed(mcp: MCP) -> set[str]:
    async def names() -> set[str]:
        async with Client(mcp.server) as client:
            return {t.name for t in await client.list_tools()}

    return asyncio.run(names())


def test_sparse_index_tool(tmp_path: Path, tiny_mlm: Path) -> None:
    plain = MCP(engine_for(write_project(tmp_path / "q", backend="bm25")))
    assert "sparse_index" not in listed(plain) and "bm25_index" in listed(plain)
    assert "it needs sparse.model_name_or_path" in plain.error("sparse_index")
    e = sparse_engine(tmp_path / "p", tiny_mlm)
    assert "sparse_index" not in {t.name for t in selected("agent")}
    mcp = MCP(e)
    assert "sparse_index" in listed(mcp)
    report = mcp.ok("sparse_index")
    assert report["documents"] == len(DOCS) and report["vocabulary"] == 30522
    assert "overwrite=true" in mcp.error("sparse_index")
    assert mcp.ok("sparse_index", {"overwrite": True})["documents"] == len(DOCS)
    hits = mcp.ok("search", {"query": QUERIES[0], "mode": "sparse", "top_k": 3})
    texts = {d["id"]: d["contents"] for d in DOCS}
    assert [h["id"] for h in hits["results"][0]["hits"]] == [i for i, _ in brute_force(tiny_mlm, QUERIES[:1], texts, 3)[0]]


def _no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, texts: Any, progress: bool = False) -> Any:
        raise AssertionError(f"a search encoded {len(texts)} documents")

    monkeypatch.setattr(learned_sparse.SparseModel, "documents", refuse)


def test_adds_are_encoded_at_add_time(tmp_path: Path, tiny_mlm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = sparse_engine(tmp_path / "p", tiny_mlm)
    e.sparse_index(progress=False)
    folder = tmp_path / "p" / "out" / "sparse"
    held = learned_sparse.index_for(e.session)  # this process's copy before another writer's add
    new = [{"id": "new1", "contents": "Lava flows from an erupting volcano and cools into basalt."},
           {"id": "doc03", "contents": "A replaced document about volcanic lava and ash clouds."}]
    e.add(new)
    assert read_manifest(folder)["collection_rows"] == len(DOCS) + 2  # encoded and published by the add
    e.delete(["doc05"])
    texts = {d["id"]: d["contents"] for d in DOCS if d["id"] not in ("doc03", "doc05")} | {
        d["id"]: d["contents"] for d in new}
    want = brute_force(tiny_mlm, QUERIES, texts, 8)
    with monkeypatch.context() as m:
        _no_encoding(m)
        for got, w in zip(e.sparse_search(QUERIES, top_k=8), want):
            check_equal(got, w)
        # a process still holding the copy from before the add reads the folder's, encoding nothing
        learned_sparse._current[str(folder)] = held
        reader = engine_for(tmp_path / "p" / "parameter.yaml")
        reader.init()
        for got, w in zip(reader.sparse_search(QUERIES, top_k=8), want):
            check_equal(got, w)
    # a collection without a sparse index: an add builds none
    other = sparse_engine(tmp_path / "o", tiny_mlm)
    other.add(new)
    assert read_manifest(tmp_path / "o" / "out" / "sparse") is None
