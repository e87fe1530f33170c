"""The openai and infinity backends against a real embedding server: `infinity_emb v2` serving the
packaged MiniLM from its own venv (`make infinity-venv`, which `make test` runs first).

Without that venv these tests fail; set RETRIEVER_SKIP_INFINITY=1 to skip them on purpose.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from retriever.config import Config
from retriever.embedders import build_embedder
from retriever.errors import EmbeddingServerError
from retriever.testing.embedding_servers import InfinityServer, infinity_venv
from retriever.testing.projects import SCIFACT, engine_for, write_project

KEY = "infinity-test-key-5e1d"
N_DOCS, N_QUERIES = 200, 20


@pytest.fixture(scope="module")
def infinity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfinityServer]:
    if os.environ.get("RETRIEVER_SKIP_INFINITY") == "1":
        pytest.skip("RETRIEVER_SKIP_INFINITY=1")
    if not (infinity_venv() / "bin" / "infinity_emb").exists():
        pytest.fail(f"no Infinity venv at {infinity_venv()}: run `make infinity-venv` "
                    "(or set RETRIEVER_SKIP_INFINITY=1 to skip these tests)")
    server = InfinityServer(tmp_path_factory.mktemp("infinity") / "server.log", KEY)
    yield server
    server.stop()


def backend_overrides(backend: str, url: str) -> dict[str, Any]:
    """The same model through each of the three backends (2 requests at a time: 2 cores)."""
    http = {"model_name": InfinityServer.MODEL, "api_key": KEY, "batch_size": 32, "concurrency": 2, "timeout": 180}
    match backend:
        case "openai":
            return {"backend": "openai", "backend_configs": {"openai": {**http, "base_url": url}}}
        case "infinity":
            return {"backend": "infinity", "backend_configs": {"infinity": {**http, "url": url}}}
    # fp32 in process: the servers run torch fp32, and bf16 may swap near-tied neighbours
    return {"backend": "sentence_transformers", "backend_configs": {"sentence_transformers": {
        "runtime": "torch", "precision": "fp32"}}}


def scifact_sample() -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The first N_QUERIES test queries with their relevant documents, filled up to N_DOCS."""
    qrels: dict[str, list[str]] = {}
    for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, _ = line.split("\t")
        qrels.setdefault(qid, []).append(did)
    queries = [json.loads(line) for line in (SCIFACT / "queries.jsonl").read_text().splitlines()]
    picked = [(q["_id"], q["text"]) for q in queries if q["_id"] in qrels][:N_QUERIES]
    wanted = {d for qid, _ in picked for d in qrels[qid]}
    docs: list[dict[str, Any]] = []
    with (SCIFACT / "corpus.jsonl").open() as f:
        for line in f:
            doc = json.loads(line)
            if doc["_id"] in wanted or len(docs) < N_DOCS - len(wanted):
                docs.append(doc)
    return docs, picked


def test_server_vectors_agree_with_the_local_model(infinity: InfinityServer) -> None:
    docs, queries = scifact_sample()
    passages = [f"{d['title']} {d['text']}" for d in docs[:24]]
    local = build_embedder(Config())
    want_p, want_q = local.encode_passages(passages), local.encode_queries([q for _, q in queries], "")
    for backend in ("openai", "infinity"):
        emb = build_embedder(Config.model_validate(backend_overrides(backend, infinity.url)))
        assert (emb.model_id, emb.dimension) == (local.model_id, local.dimension)
        got_p, got_q = emb.encode_passages(passages), emb.encode_queries([q for _, q in queries], "")
        assert got_p.shape == want_p.shape and got_q.shape == want_q.shape
        assert (got_p * want_p).sum(1).min() >= 0.999, backend
        assert (got_q * want_q).sum(1).min() >= 0.999, backend


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_three_backends_give_the_same_scifact_top10(infinity: InfinityServer, tmp_path: Path) -> None:
    docs, queries = scifact_sample()
    corpus = tmp_path / "scifact_sample.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    tops: dict[str, list[list[str]]] = {}
    for backend in ("sentence_transformers", "openai", "infinity"):
        e = engine_for(write_project(tmp_path / backend, corpus, **backend_overrides(backend, infinity.url)))
        e.init()
        e.embed(progress=False)
        e.index()
        tops[backend] = [[h.id for h in hits] for hits in e.search([q for _, q in queries], top_k=10, mode="dense")]
    assert len(tops["sentence_transformers"]) == N_QUERIES
    assert tops["openai"] == tops["sentence_transformers"]
    assert tops["infinity"] == tops["sentence_transformers"]


def test_a_wrong_key_is_refused_by_the_server_and_not_shown(infinity: InfinityServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "not-the-key-0a9b8c"
    overrides = backend_overrides("openai", infinity.url)
    overrides["backend_configs"]["openai"].update(api_key=wrong, max_retries=0)
    with pytest.raises(EmbeddingServerError, match="HTTP 401") as err:
        build_embedder(Config.model_validate(overrides))
    assert infinity.url in str(err.value) and wrong not in str(err.value)


def test_an_index_built_locally_loads_under_the_server_backend(infinity: InfinityServer, built_project: Path) -> None:
    """The manifest records the same model id and dimension, so the server can answer queries
    against an index the local model built."""
    e = engine_for(built_project)
    status = e.init(**backend_overrides("infinity", infinity.url))
    assert status["dense_index"] == 30 and status["dimension"] == 384
    local = engine_for(built_project)
    local.init()
    q = "what causes tides"
    assert [h.id for h in e.search(q, top_k=5, mode="dense")[0]] == [h.id for h in local.search(q, top_k=5, mode="dense")[0]]
    np.testing.assert_allclose([h.score for h in e.search(q, top_k=5, mode="dense")[0]],
                               [h.score for h in local.search(q, top_k=5, mode="dense")[0]], atol=2e-3)


@pytest.mark.parametrize("backend, demo", [pytest.param("openai", True, id="openai-demo"),
                                           pytest.param("infinity", False, id="infinity-normal")])
def test_milvus_works_with_the_server_backends(infinity: InfinityServer, built_project: Path, tmp_path: Path,
                                               backend: str, demo: bool) -> None:
    """Milvus Lite filled through an HTTP embedding backend, in demo and in normal mode, answers
    like the local model with FAISS."""
    import shutil

    shutil.copytree(built_project.parent, tmp_path / "p")
    path = tmp_path / "p" / "parameter.yaml"
    milvus = {"index_backend": "milvus", "is_demo": demo, "collection_name": f"srv_{backend}",
              "index_backend_configs": {"milvus": {"uri": str(tmp_path / "milvus.db")}}}
    e = engine_for(path)
    e.init(**backend_overrides(backend, infinity.url), **milvus)
    if not demo:
        e.embed(progress=False)
    assert e.index()["documents"] == 30
    local = engine_for(built_project)
    local.init()
    queries = ["what causes tides", "how vaccines train the immune system"]
    assert [[h.id for h in hits] for hits in e.search(queries, top_k=5, mode="dense")] == \
        [[h.id for h in hits] for hits in local.search(queries, top_k=5, mode="dense")]
