"""Saved indexes: manifests, refusal of a mismatch at init, crash safety of every write."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from conftest import MCP, copy_built, run_and_kill
from retriever.errors import IndexMismatchError
from retriever.store.persist import publish, read_manifest
from retriever.testing.projects import engine_for, write_project

Q = "what causes earthquakes"



def test_saved_indexes_load_at_init_with_their_manifests(built_project: Path) -> None:
    e = engine_for(built_project)
    status = e.init()
    assert status["dense_index"] == 30 and status["bm25_index"] == 30
    manifest = json.loads((built_project.parent / "out" / "faiss" / "manifest.json").read_text())
    assert manifest["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert manifest["dimension"] == 384 and manifest["count"] == 30 and manifest["format_version"] == 1
    assert manifest["corpus_fingerprint"] == e.docs.fingerprint
    assert e.search(Q, top_k=1, mode="dense")[0][0].id == "doc11"


def test_a_changed_corpus_is_refused_at_init_not_at_search(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    corpus = path.parent / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("Photosynthesis", "Chemosynthesis"))
    mcp = MCP(engine_for(path))
    message = mcp.error("retriever_init")
    assert "does not match" in message and "corpus_fingerprint" in message
    assert "overwrite=true" in message
    # With overwrite the stale index is skipped with a warning, so it can be rebuilt.
    status = mcp.ok("retriever_init", {"overwrite": True})
    assert status["dense_index"] is None and any("not loaded" in w for w in status["warnings"])
    mcp.ok("retriever_embed")
    mcp.ok("retriever_index")
    assert mcp.ok("retriever_search", {"query_list": "chemosynthesis", "top_k": 1})["ret_ids"] == [["doc00"]]
    assert "bm25" in mcp.error("retriever_init")  # init arguments last one call: BM25 is still stale
    mcp.ok("retriever_init", {"overwrite": True})
    mcp.ok("bm25_index")
    status = mcp.ok("retriever_init")  # both rebuilt: they load
    assert status["dense_index"] == 30 and status["bm25_index"] == 30


def test_an_index_of_another_model_is_refused(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    manifest_path = path.parent / "out" / "faiss" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"] = "BAAI/bge-small-en-v1.5"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="model: saved 'BAAI/bge-small-en-v1.5'"):
        engine_for(path).init()


def test_embeddings_without_their_manifest_are_refused(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    (path.parent / "out" / "embedding.npy.json").unlink()
    e = engine_for(path)
    e.init()
    with pytest.raises(IndexMismatchError, match="no readable manifest"):
        e.index(overwrite=True)


def test_a_failed_write_leaves_the_previous_index_loadable(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    folder = path.parent / "out" / "faiss"
    before = read_manifest(folder)

    def half_write(p: Path) -> None:
        p.write_bytes(b"half an index")
        raise OSError("disk full")

    with pytest.raises(OSError):
        publish(folder, {"kind": "faiss", "count": 1}, half_write)
    assert read_manifest(folder) == before
    e = engine_for(path)
    assert e.init()["dense_index"] == 30
    assert e.search(Q, top_k=1, mode="dense")[0][0].id == "doc11"


def _rebuild_forever(config: str, ready: multiprocessing.synchronize.Event) -> None:
    e = engine_for(Path(config))
    e.init()
    ready.set()
    while True:
        e.index(overwrite=True)
        e.bm25_index(overwrite=True, progress=False)


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_killing_the_writer_mid_build_never_leaves_a_half_index(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    for delay in (0.05, 0.13, 0.31):
        run_and_kill(_rebuild_forever, path, delay)
        e = engine_for(path)
        status = e.init()
        assert status["dense_index"] == 30 and status["bm25_index"] == 30
        assert e.search(Q, top_k=1, mode="dense")[0][0].id == "doc11"
        assert e.bm25_search("earthquakes volcanoes plates", top_k=1)[0][0].id == "doc11"


def test_embed_killed_midway_keeps_the_old_matrix(tmp_path: Path, built_project: Path) -> None:
    path = copy_built(built_project, tmp_path / "p")
    e = engine_for(path)
    e.init()
    old = np.load(path.parent / "out" / "embedding.npy")

    def boom(texts: list[str]) -> np.ndarray:
        raise KeyboardInterrupt

    e.embedder.encode_passages = boom  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        e.embed(overwrite=True, progress=False)
    assert np.array_equal(np.load(path.parent / "out" / "embedding.npy"), old)
    assert not list((path.parent / "out").glob(".*tmp"))
    assert e.embeddings_valid()


def test_a_finished_embed_killed_before_removing_its_log_leaves_nothing(tmp_path: Path, built_project: Path) -> None:
    """Killed between writing the manifest and removing the resume log (tests/test_resume.py's fourth kill can
    land there): the next `retriever index` keeps the matrix and removes the log; a log whose partial matrix is
    still there (a write to resume) stays."""
    path = copy_built(built_project, tmp_path / "p")
    out = path.parent / "out"
    e = engine_for(path)
    e.init()
    log = out / ".embedding.npy.partial.json"
    log.write_text("{}")  # what such a kill leaves: the log, no partial matrix
    (out / ".embedding.npy.partial").write_bytes(b"")
    assert e.embeddings_valid() and log.exists()  # a partial matrix beside it: not ours to drop
    (out / ".embedding.npy.partial").unlink()
    assert e.embeddings_valid() and not log.exists()
    assert (out / "embedding.npy").exists()


def test_a_fresh_project_with_a_missing_output_folder_builds(tmp_path: Path) -> None:
    path = write_project(tmp_path / "deep", )
    e = engine_for(path)
    e.init()
    e.embed(progress=False)
    e.index()
    assert (tmp_path / "deep" / "out" / "faiss" / "manifest.json").is_file()
