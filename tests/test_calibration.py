"""hybrid.vector_weight auto (calibration.py): a self-retrieval check, measured once per corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from retriever.search import calibration
from retriever.search.calibration import vector_weight
from retriever.session import forget_learned
from retriever.testing.projects import ROOT, engine_for, write_project


@pytest.mark.parametrize("dense, bm25, expected", [
    pytest.param(0.68, 0.99, 0.5, id="both-read-the-corpus"),
    pytest.param(0.21, 1.0, 0.21, id="dense-cannot"),
    pytest.param(0.9, 0.3, 1 - 0.3 / 0.9, id="bm25-cannot"),
    pytest.param(0.0, 0.9, calibration.FLOOR, id="dense-finds-nothing"),
    pytest.param(0.0, 0.0, 0.5, id="neither"),
])
def test_vector_weight_acts_only_below_half(dense: float, bm25: float, expected: float) -> None:
    assert vector_weight(dense, bm25) == pytest.approx(expected)


def invented_corpus(path: Path, n: int = 1000) -> Path:
    """bench/synth.py's invented words (a Zipfian vocabulary): BM25 finds a span of a document,
    the packaged model cannot read them."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from synth import documents

    with path.open("w", encoding="utf-8") as f:
        for doc in documents(n, seed=3):
            f.write(json.dumps({"id": doc["id"], "contents": doc["contents"]}) + "\n")
    return path


def built(folder: Path, corpus: Path | None = None):  # noqa: ANN201
    e = engine_for(write_project(folder, **({"corpus": corpus} if corpus else {})))
    e.init()
    e.embed(progress=False)
    e.index()
    e.bm25_index(progress=False)
    return e


def test_auto_is_half_on_text_the_model_reads_and_measured_once(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    forget_learned()
    e = built(tmp_path / "p")
    hits = e.hybrid_search("photosynthesis and sunlight", top_k=5)[0]
    saved = json.loads(Path(str(e.session.config.paths().bm25) + ".calibration.json").read_text())
    assert saved["vector_weight"] == 0.5 and saved["probes"] == 30 and saved["dense_mrr"] >= 0.5 * saved["bm25_mrr"]
    forget_learned()  # as a new process: read from the file, not measured again
    monkeypatch.setattr(calibration, "measure", lambda *a: pytest.fail("measured twice"))
    fresh = engine_for(e.base_dir / "parameter.yaml")
    fresh.init()
    assert [h.id for h in fresh.hybrid_search("photosynthesis and sunlight", top_k=5)[0]] == [h.id for h in hits]
    explicit = fresh.hybrid_search("photosynthesis and sunlight", top_k=5, vector_weight=0.5)[0]
    assert [(h.id, h.score) for h in explicit] == [(h.id, h.score) for h in hits]


@pytest.mark.slow  # embeds 600 documents
def test_auto_leans_on_bm25_where_the_model_cannot_read_the_corpus(tmp_path: Path) -> None:
    forget_learned()
    e = built(tmp_path / "p", invented_corpus(tmp_path / "invented.jsonl", 600))
    text = e.session.collection.get(17).text
    query = " ".join(text.split()[10:16])
    hybrid = e.hybrid_search(query, top_k=5)[0]
    saved = json.loads(Path(str(e.session.config.paths().bm25) + ".calibration.json").read_text())
    print(saved)
    assert saved["dense_mrr"] < 0.5 * saved["bm25_mrr"] and saved["vector_weight"] < 0.5
    assert hybrid[0].id == "d17" == e.bm25_search(query, top_k=1)[0][0].id


def test_a_read_only_server_measures_but_writes_no_file(tmp_path: Path) -> None:
    forget_learned()
    e = built(tmp_path / "p")
    ro = engine_for(e.base_dir / "parameter.yaml", {"security": {"read_only": True}})
    ro.init()
    ro.hybrid_search("tides and the moon", top_k=3)
    assert not Path(str(ro.session.config.paths().bm25) + ".calibration.json").exists()
    assert any(v["vector_weight"] == 0.5 for v in ro.session.learned.calibration.values())


def test_a_collection_without_a_corpus_is_measured_again_when_it_doubles_not_per_add(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from retriever.testing.projects import SAMPLE

    forget_learned()
    docs = [json.loads(line) for line in SAMPLE.open()]
    e = engine_for(write_project(tmp_path / "c", collection_name="notes", corpus_path=None))
    e.init()
    e.add(docs[:12])
    e.bm25_index(progress=False)
    measured = []
    real = calibration.measure
    monkeypatch.setattr(calibration, "measure", lambda *a: measured.append(1) or real(*a))
    e.hybrid_search("photosynthesis", top_k=3)
    e.add(docs[12:15])  # 15 documents: the same size class as 12
    e.hybrid_search("photosynthesis", top_k=3)
    assert len(measured) == 1
    e.add(docs[15:])  # 30: doubled
    e.hybrid_search("photosynthesis", top_k=3)
    assert len(measured) == 2
