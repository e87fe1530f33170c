"""Issue 47: a hidden document never leaks through a restricted caller's scores where Milvus holds the
documents (index_backend milvus, full_text, on Milvus Lite 3.2.2 in process).

tests/test_visibility_scores.py's case on held collections: X holds the visible documents and the planted
hidden ones (strong matches holding the queries' rare words, a word only hidden documents hold, long ones,
many holding a common word, many of stop words only), some added after the build, and one visible document
added and deleted; Y holds only the visible documents, indexed at once. A reader of group eng searching X
must get what the operator gets searching Y, whose BM25 Milvus scores with Y's own statistics: the same
hits with the same scores (to float32's precision: Milvus Lite sums in float64, indexes/milvus/seen.py in
float32 as bm25s does), in bm25, dense and hybrid (adaptive fusion's bound included), with and without a
filter. The reader's first search comes before X's adds and delete, so the copy it reads must follow them.

On the Milvus 2.3.5 server (the `milvus_server` marker) X and Y are dense collections (is_demo): that server
has no BM25 function (Milvus 2.5 added it), so there only the dense case runs (the rule's expression in a
server's search, with and without a filter, after adds and a delete); BM25, hybrid and the bounds are skipped.
SeenText's paged read (seen.PAGE) is checked with pages smaller than the collection: X read page by page
gives the same scores (reading one page alone, a planted bug, failed it)."""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from retriever.errors import RetrieverError
from retriever.indexes.milvus import seen
from retriever.security import visibility
from retriever.security.principals import OPERATOR, Principal
from retriever.testing.projects import SAMPLE, engine_for
from test_visibility_scores import (
    ADDED,
    HIDDEN,
    QUERIES,
    RARE,
    READER,
    as_,
    assert_hidden_documents_move_scores,
    project,
    random_queries,
)

MODES = ("bm25", "dense", "hybrid")
TOP_K = 200  # more than Y's documents (and X's visible ones)
BACKENDS = [pytest.param("lite", id="lite"), pytest.param("server", id="server", marks=pytest.mark.milvus_server)]
NO_BM25 = "the Milvus 2.3.5 server has no BM25 function (Milvus 2.5 added it): its held collections rank dense only"
FILTERS = [pytest.param(None, id="all"), pytest.param({"field": "meta.year", "operator": ">=", "value": 2019},
                                                      id="filtered")]


def held(folder: Path, docs: list[dict[str, Any]], server: str | None = None, **milvus: Any) -> Any:
    """A full_text collection of `docs` in Milvus Lite (visibility on: field acl, missing public), indexed at
    once; with `server` (a Milvus 2.3.5 server's uri), a dense collection (is_demo) there."""
    config = project(folder, docs)
    cfg = yaml.safe_load(config.read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = ({"uri": str(folder / "milvus.db"), "full_text": True, **milvus}
                                              if server is None else {"uri": server, **milvus})
    cfg["is_demo"] = server is not None
    cfg["collection_name"] = f"scores_{uuid.uuid4().hex[:8]}"
    config.write_text(yaml.safe_dump(cfg))
    engine = engine_for(config)
    engine.init()
    engine.index()
    return engine


@pytest.fixture(scope="module", params=BACKENDS)
def collections(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, list[str]]:
    """X (visible and hidden documents, searched by a reader) and Y (the visible ones alone, by the operator),
    in Milvus Lite (full_text) or on the Milvus 2.3.5 server (dense)."""
    server = request.getfixturevalue("milvus_server_uri") if request.param == "server" else None
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    mixed = list(sample)
    for i, doc in enumerate(HIDDEN):  # hidden documents between the visible ones
        mixed.insert(min(len(mixed), 3 * i + 1), doc)
    root = tmp_path_factory.mktemp("held_scores")
    x = held(root / "x", mixed, server)
    # its copy of X (BM25), read before the writes below
    as_(READER, lambda: x.search(QUERIES[:1], top_k=3, mode="bm25" if server is None else "dense"))
    x.add(ADDED)
    x.delete(["v-gone"])
    visible_added = [d for d in ADDED if d["acl"] == "*" and d["id"] != "v-gone"]
    y = held(root / "y", sample + visible_added, server)
    texts = [d["contents"] for d in sample + visible_added]
    return x, y, QUERIES + random_queries(texts, 12)


def ranking(engine: Any, principal: Principal, mode: str, queries: list[str],
            filters: dict[str, Any] | None = None) -> list[list[tuple[str, float]]]:
    """Per query, every hit (top_k past the collections' sizes: no tie is cut) as (id, score), ties in id
    order (Milvus orders equal scores as its postings come, seen.py by position)."""
    hits = as_(principal, lambda: engine.search(queries, top_k=TOP_K, mode=mode, filters=filters))
    return [sorted(((h.id, float(h.score)) for h in per_query), key=lambda hit: (-round(hit[1], 5), hit[0]))
            for per_query in hits]


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("mode", MODES)
def test_a_reader_of_x_gets_what_the_operator_of_only_the_visible_documents_gets(
        collections: tuple[Any, Any, list[str]], mode: str, filters: dict[str, Any] | None) -> None:
    x, y, queries = collections
    if mode != "dense" and x.config.is_demo:
        pytest.skip(NO_BM25)
    same(x, y, queries, mode, filters)


def same(x: Any, y: Any, queries: list[str], mode: str, filters: dict[str, Any] | None) -> None:
    """A reader searching X gets what the operator gets searching Y: the same hits, the same scores."""
    mine, alone = ranking(x, READER, mode, queries, filters), ranking(y, OPERATOR, mode, queries, filters)
    for query, got, want in zip(queries, mine, alone):
        assert [i for i, _ in got] == [i for i, _ in want], (mode, query)
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5, abs=1e-6), (mode, query)
        assert not any(i.startswith("h-") for i, _ in got)
    if mode == "bm25":
        assert mine[queries.index(RARE)] == [], "a word only hidden documents hold finds nothing"


@pytest.mark.parametrize("filters", FILTERS)
def test_a_reader_s_copy_larger_than_a_page_is_read_whole(collections: tuple[Any, Any, list[str]],
                                                          filters: dict[str, Any] | None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """seen.py reads the documents a reader sees (and those passing its filter) PAGE at a time: with pages
    of 8 (1000 by default) X's visible documents take several, and the copy scores as Y does."""
    x, y, queries = collections
    if x.config.is_demo:
        pytest.skip(NO_BM25)
    monkeypatch.setattr(seen, "PAGE", 8)
    monkeypatch.setattr(seen, "_KEPT", OrderedDict())  # no copy kept: this one is read in pages
    same(x, y, queries, "bm25", filters)
    (copy,) = [once._value for once in seen._KEPT.values()]
    assert copy is not None and len(copy.ids) > 3 * seen.PAGE


def test_the_reader_s_bounds_are_those_of_only_the_visible_documents(collections: tuple[Any, Any, list[str]]) -> None:
    """Adaptive fusion's BM25 scale: the reader's over what it sees equals Y's own (df.py), X's whole differs."""
    x, y, queries = collections
    if x.config.is_demo:
        pytest.skip(NO_BM25)
    rule = visibility.rule(x.config, READER)
    mine = x.session.held.seen_by(rule).text_bounds(x.session.dense, queries)
    assert mine == pytest.approx(y.session.dense.bm25_bounds(queries), rel=1e-12)
    assert mine != pytest.approx(x.session.dense.bm25_bounds(queries), rel=1e-3)


def test_the_hidden_documents_do_move_the_collection_s_own_scores(collections: tuple[Any, Any, list[str]]) -> None:
    """Not a vacuous comparison: searched by the operator, Milvus scores X's visible documents otherwise than
    Y's, and the rare word finds the hidden documents."""
    x, y, queries = collections
    if x.config.is_demo:
        pytest.skip(NO_BM25)
    assert_hidden_documents_move_scores(ranking(x, OPERATOR, "bm25", queries), ranking(y, OPERATOR, "bm25", queries),
                                        queries)


def test_a_reader_s_bm25_needs_our_terms(tmp_path: Path) -> None:
    """full_text_analyzer: milvus keeps no terms of ours to count: a reader's BM25 is refused (the operator's runs)."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    engine = held(tmp_path / "m", sample[:6] + HIDDEN[:2], full_text_analyzer="milvus")
    assert ranking(engine, OPERATOR, "bm25", ["photosynthesis"])[0]
    with pytest.raises(RetrieverError, match="full_text_analyzer: bm25s"):
        ranking(engine, READER, "bm25", ["photosynthesis"])


def test_a_document_hidden_after_the_reader_s_copy_was_read_is_not_shown(tmp_path: Path) -> None:
    """The copy follows this process's writes; one it did not count (another process's, on a Milvus server)
    leaves it stale, but each hit is read again and checked with the rule: a document since hidden is not shown."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    engine = held(tmp_path / "h", sample[:8])
    assert "doc00" in [i for i, _ in ranking(engine, READER, "bm25", ["photosynthesis"])[0]]
    store = engine.session.dense.store
    counted = store._writes
    doc = sample[0]
    store.upsert([doc["id"]], np.zeros((1, engine.session.dense.dimension), np.float32), [doc["contents"]],
                 [{"topic": doc["topic"], "acl": ["hr"]}])
    store._writes = counted  # as if another process had written it
    assert "doc00" not in [i for i, _ in ranking(engine, READER, "bm25", ["photosynthesis"])[0]]
    assert "doc00" in [i for i, _ in ranking(engine, OPERATOR, "bm25", ["photosynthesis"])[0]]
