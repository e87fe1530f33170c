"""Issue 47: a hidden document never leaks through a restricted caller's scores.

Collection X holds the visible documents and hidden ones (acl: [hr]) planted to move BM25's statistics
(strong matches holding the queries' rare words, a word only hidden documents hold, long documents
that move the average length, many holding a common word, many of stopwords only that move hybrid's
calibrated weight); some of each come after the build (the BM25
delta), and one visible document is added and deleted. Collection Y holds only the visible documents,
in the same order, indexed from scratch. A reader of group eng searching X must get what the operator
gets searching Y: the same hits with the same scores (to 1e-6; measured: equal to the bit, as
indexes/bm25_visible.py sums as bm25s does), in every mode (real parts: the packaged MiniLM, FAISS,
bm25s; the library, with the principal set as the HTTP guard sets it)."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from retriever.security.principals import OPERATOR, PRINCIPAL, Principal
from retriever.testing.projects import SAMPLE, engine_for, write_project

READER = Principal("reader", frozenset({"read"}), groups=("eng",))
RARE = "zorblaxite"  # only hidden documents hold it
FILLER = ("quartz lattice harbour ledger violet orchard tundra beacon " * 12).strip()  # moves the average length
HIDDEN = [
    {"id": "h-photo", "contents": "Photosynthesis photosynthesis: light energy, glucose and oxygen from light "
                                  f"energy. {RARE}.", "acl": ["hr"]},
    {"id": "h-long-1", "contents": f"{FILLER} mitochondria", "acl": ["hr"]},
    {"id": "h-rare", "contents": f"{RARE} {RARE} in the mitochondria of a cell, ATP and DNA.", "acl": "hr"},
    {"id": "h-long-2", "contents": f"{FILLER} {FILLER} DNA", "acl": ["hr"]},
] + [{"id": f"h-dna-{i}", "contents": f"DNA strand {i} of the replication study, {RARE} samples.", "acl": ["hr"]}
     for i in range(8)]
STOP = "the of and to in is was it for on with as by at from that this be or an are were which".split()
# texts of stopwords only: BM25 finds none of them (one empty term each) where dense does, so the collection's
# self-retrieval check gives hybrid a dense share of 0.65, the visible documents' 0.5 (calibration.py)
HIDDEN += [{"id": f"h-stop-{i}", "contents": " ".join(np.random.default_rng(i).choice(STOP, 24)), "acl": ["hr"]}
           for i in range(120)]
ADDED = [  # after the build: the BM25 delta
    {"id": "v-add-1", "contents": "DNA replication copies both strands before a cell divides.", "acl": "*"},
    {"id": "h-add", "contents": f"Black holes and light: {RARE} near the event horizon of massive stars.",
     "acl": ["hr"]},
    {"id": "v-gone", "contents": "Photosynthesis in algae uses light energy; this note is deleted.", "acl": "*"},
    {"id": "v-add-2", "contents": "Light from the Sun drives photosynthesis and the water cycle.", "acl": "*"},
]
QUERIES = [
    "photosynthesis light energy glucose",
    RARE,  # expected: what Y gives, no BM25 hit
    f"{RARE} DNA replication strand",
    "mitochondria ATP cell",
    "black holes light event horizon",
    "DNA",
]
MODES = ("bm25", "dense", "hybrid")


def random_queries(texts: list[str], n: int, seed: int = 7) -> list[str]:
    """`n` queries of two to four words of the visible texts, one in three with the hidden word."""
    rng = np.random.default_rng(seed)
    words = sorted({w.strip(".,;:()").lower() for t in texts for w in t.split() if len(w) > 3})
    out = []
    for i in range(n):
        picked = [str(w) for w in rng.choice(words, size=int(rng.integers(2, 5)), replace=False)]
        out.append(" ".join(picked + ([RARE] if i % 3 == 0 else [])))
    return out


def project(folder: Path, docs: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    corpus = folder / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    config = write_project(folder, corpus)
    cfg = yaml.safe_load(config.read_text())
    cfg.update(corpus_path="docs.jsonl", security={"visibility": {"field": "acl", "missing": "public"}})
    cfg["backend_configs"]["bm25"]["rebuild_fraction"] = 0.5  # the adds stay a delta
    config.write_text(yaml.safe_dump(cfg))
    return config


def built(config: Path) -> Any:
    engine = engine_for(config)
    engine.init()
    engine.embed(progress=False)
    engine.index()
    engine.bm25_index(progress=False)
    return engine


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, list[str]]:
    """X (visible and hidden documents, searched by a reader) and Y (the visible ones alone, by the operator)."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    mixed = list(sample)
    for i, doc in enumerate(HIDDEN):  # hidden documents between the visible ones
        mixed.insert(min(len(mixed), 3 * i + 1), doc)
    root = tmp_path_factory.mktemp("scores")
    x = built(project(root / "x", mixed))
    x.add(ADDED)
    x.delete(["v-gone"])
    assert x.session.bm25.delta is not None and len(x.session.bm25.delta) == len(ADDED)  # scored as the delta
    visible_added = [d for d in ADDED if d["acl"] == "*" and d["id"] != "v-gone"]
    y = built(project(root / "y", sample + visible_added))
    texts = [d["contents"] for d in sample + visible_added]
    return x, y, QUERIES + random_queries(texts, 12)


def as_(principal: Principal, work: Callable[[], Any]) -> Any:
    """`work()` run as `principal`, as the HTTP guard sets it for a request."""
    ctx = contextvars.copy_context()
    ctx.run(PRINCIPAL.set, principal)
    return ctx.run(work)


def ranking(engine: Any, principal: Principal, mode: str, queries: list[str]) -> list[list[tuple[str, float]]]:
    hits = as_(principal, lambda: engine.search(queries, top_k=10, mode=mode))
    return [[(h.id, float(h.score)) for h in per_query] for per_query in hits]


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_of_x_gets_what_the_operator_of_only_the_visible_documents_gets(
        collections: tuple[Any, Any, list[str]], mode: str) -> None:
    x, y, queries = collections
    seen, alone = ranking(x, READER, mode, queries), ranking(y, OPERATOR, mode, queries)
    for query, got, want in zip(queries, seen, alone):
        assert [i for i, _ in got] == [i for i, _ in want], (mode, query)
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6, rel=0), (mode, query)
        assert not any(i.startswith("h-") for i, _ in got)
    if mode == "bm25":
        assert seen[queries.index(RARE)] == [], "a word only hidden documents hold finds nothing"


def test_the_hidden_documents_do_move_the_collection_s_own_scores(collections: tuple[Any, Any, list[str]]) -> None:
    """Not a vacuous comparison: searched by the operator, X's visible documents score otherwise than
    Y's, the rare word finds the hidden documents, and X's hybrid weight is not the visible documents'."""
    x, y, queries = collections
    ranking(x, OPERATOR, "hybrid", queries[:1])
    ranking(x, READER, "hybrid", queries[:1])
    weights = {key.startswith('{"of"'): found["vector_weight"] for key, found in x.session.learned.calibration.items()}
    assert weights[True] == 0.5 and weights[False] > 0.6  # the reader's (over what it sees), the collection's
    assert_hidden_documents_move_scores(ranking(x, OPERATOR, "bm25", queries), ranking(y, OPERATOR, "bm25", queries),
                                        queries)


def assert_hidden_documents_move_scores(everything: list[list[tuple[str, float]]],
                                        alone: list[list[tuple[str, float]]], queries: list[str]) -> None:
    """The operator's BM25 over visible + hidden documents (`everything`) against over the visible
    alone: the rare word finds only hidden documents, and more than 10 visible hits score otherwise."""
    assert everything[queries.index(RARE)] and all(i.startswith("h-") for i, _ in everything[queries.index(RARE)])
    moved = 0
    for got, want in zip(everything, alone):
        theirs = dict(want)
        moved += sum(1 for i, s in got if i in theirs and abs(s - theirs[i]) > 1e-3)
    assert moved > 10


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_scored_again_over_every_document_the_index_s_own_scores(method: str) -> None:
    """The rescoring is bm25s's: seeing every document of an index gives its own scores to the bit, and
    an index whose last documents are a delta scores as one built over them all."""
    from retriever.config import BM25Config
    from retriever.indexes.bm25 import BM25Index

    texts = [json.loads(line)["contents"] for line in SAMPLE.read_text().splitlines() if line.strip()]
    queries = ["photosynthesis light energy", "DNA replication strand strand", "the of and", RARE, "cell ATP"]
    cfg = BM25Config(method=method)
    whole = BM25Index.build(texts, cfg, show_progress=False)
    grown = BM25Index.build(texts[:20], cfg, show_progress=False).with_added(texts[20:], np.arange(20, len(texts)))
    every = np.ones(len(texts), bool)

    def read(rows: list[int]) -> list[str]:
        return [texts[r] for r in rows]

    own = whole.search(queries, 10)
    for index in (whole, grown):
        rows, scores = index.search(queries, 10, None, every, read)
        assert [r.tolist() for r in rows] == [r.tolist() for r in own[0]]
        assert [s.tolist() for s in scores] == [s.tolist() for s in own[1]]
        assert index.bounds(queries, every, read) == whole.bounds(queries)
