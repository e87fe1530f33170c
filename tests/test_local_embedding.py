"""The local backend: precision option, and queries served while the corpus is being embedded."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from retriever.config import Config
from retriever.embedders import build_embedder
from retriever.embedders.sentence_transformers import native_bf16_cpu
from retriever.testing.projects import SCIFACT


@pytest.fixture(scope="module")
def passages() -> list[str]:
    with (SCIFACT / "corpus.jsonl").open() as f:
        docs = [json.loads(next(f)) for _ in range(64)]
    return [f"{d['title']} {d['text']}" for d in docs]


def test_bf16_vectors_match_fp32(passages: list[str]) -> None:
    fp32 = build_embedder(Config.model_validate({"backend_configs": {"sentence_transformers": {"runtime": "torch"}}}))
    bf16 = build_embedder(Config.model_validate({"backend_configs": {"sentence_transformers": {
        "runtime": "torch", "precision": "bf16"}}}))
    a, b = fp32.encode_passages(passages[:8]), bf16.encode_passages(passages[:8])
    assert b.dtype == np.float32 and b.shape == a.shape
    assert (a * b).sum(1).min() >= 0.995
    # Emulated bf16 is slower than fp32: say so where the CPU has no native bf16.
    assert any("precision bf16" in w for w in bf16.warnings) == (not native_bf16_cpu())
    assert not fp32.warnings or not any("precision" in w for w in fp32.warnings)


def test_a_query_is_answered_while_the_corpus_is_being_embedded(passages: list[str]) -> None:
    emb = build_embedder(Config.model_validate({"batch_size": 4}))
    # 512 short passages, 32 pieces of 4 batches: seconds on any runtime (the fastest, OpenVINO bf16,
    # embedded 128 in under 0.5 s in CI, before the query came)
    corpus = [p[:400] for p in passages] * 8
    done: dict[str, float] = {}

    def embed() -> None:
        emb.encode_passages(corpus)
        done["embed"] = time.perf_counter()

    worker = threading.Thread(target=embed)
    worker.start()
    time.sleep(0.5)
    emb.encode_queries(["what causes tides"], "")
    done["query"] = time.perf_counter()
    worker.join()
    assert done["query"] < done["embed"]


def test_pieces_give_the_same_vectors_as_one_call(passages: list[str]) -> None:
    emb = build_embedder(Config.model_validate({"batch_size": 4, "backend_configs": {"sentence_transformers": {
        "runtime": "torch"}}}))
    texts = passages[:40]  # 3 pieces of 16
    whole = emb.model.encode(texts, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(emb.encode_passages(texts), whole, atol=1e-5)
