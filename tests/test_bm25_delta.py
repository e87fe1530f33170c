"""BM25 after adds without a rebuild (search/bm25.py's Delta): added documents score as a full build
over base + added would score them, base documents as their own build scored them (Lucene's
choice), for every bm25s method; the base is never touched."""

from __future__ import annotations

import json

import numpy as np
import pytest
from retriever.config import BM25Config
from retriever.indexes.bm25 import BM25Index
from retriever.testing.projects import SAMPLE

BASE = [json.loads(line)["contents"] for line in SAMPLE.open()]
ADDED = [
    "Quokkas are small wallabies living on Rottnest Island; quokka photosynthesis is not a thing.",
    "Axolotls regenerate limbs and heart tissue; DNA repair genes are active in the regenerating limb.",
    "Glucose and oxygen come out of photosynthesis, and the heart pumps blood with glucose to every cell.",
]
QUERIES = ["quokka island", "photosynthesis glucose oxygen", "DNA heart tissue", "earthquakes plates", "nothingword"]
METHODS = ["lucene", "robertson", "atire", "bm25l", "bm25+"]


def scores_by_row(index: BM25Index, query: str, k: int, allowed: np.ndarray | None = None) -> dict[int, float]:
    rows, scores = index.search([query], k, allowed)
    return dict(zip(rows[0].tolist(), scores[0].tolist()))


@pytest.mark.parametrize("method", METHODS)
def test_added_documents_score_as_a_full_build_would(method: str) -> None:
    cfg = BM25Config(method=method)
    base = BM25Index.build(BASE, cfg, show_progress=False)
    n = len(BASE)
    grown = base.with_added(ADDED[:2], np.arange(n, n + 2)).with_added(ADDED[2:], np.arange(n + 2, n + 3))
    full = BM25Index.build(BASE + ADDED, cfg, show_progress=False)
    assert len(grown) == n + 3 and grown.delta is not None and len(grown.delta) == 3
    for query in QUERIES:
        got = scores_by_row(grown, query, n + 3)
        want_added = {r: s for r, s in scores_by_row(full, query, n + 3).items() if r >= n}
        want_base = scores_by_row(base, query, n)
        assert {r for r in got if r >= n} == set(want_added) and {r for r in got if r < n} == set(want_base)
        for row, score in got.items():
            assert score == pytest.approx(want_added[row] if row >= n else want_base[row], rel=1e-5, abs=1e-6)
        assert list(got.values()) == sorted(got.values(), reverse=True)
    assert scores_by_row(grown, "quokka", 5)  # a word only the added documents have
    assert scores_by_row(base, "quokka", 5) == {}  # the base's tokenizer did not learn it


def test_deleted_rows_are_masked_in_base_and_delta() -> None:
    base = BM25Index.build(BASE, BM25Config(), show_progress=False)
    n = len(BASE)
    grown = base.with_added(ADDED, np.arange(n, n + 3))
    live = np.ones(n + 3, bool)
    every = scores_by_row(grown, "photosynthesis glucose heart", n + 3)
    dead = [r for r in every][:2] + [n + 2]
    live[dead] = False
    assert set(scores_by_row(grown, "photosynthesis glucose heart", n + 3, live)) == set(every) - set(dead)
    assert grown.live_documents(live) == n + 3 - len(set(dead))


def test_a_delta_over_rows_that_are_not_the_positions() -> None:
    """A base built over live rows only (rows 0, 2, 4...), the delta appended at later rows."""
    rows = np.arange(0, 2 * len(BASE), 2)
    base = BM25Index.build(BASE, BM25Config(), show_progress=False, rows=rows)
    grown = base.with_added(ADDED, np.array([100, 103, 107]))
    got = scores_by_row(grown, "quokka photosynthesis", 10)
    assert 100 in got and set(got) <= set(rows.tolist()) | {100, 103, 107}
    assert set(scores_by_row(base, "photosynthesis", 10)) <= set(got)


def test_an_index_with_a_delta_is_not_saved(tmp_path) -> None:
    base = BM25Index.build(BASE, BM25Config(), show_progress=False)
    with pytest.raises(ValueError, match="not saved"):
        base.with_added(ADDED, np.arange(30, 33)).save(tmp_path / "bm25", {})
