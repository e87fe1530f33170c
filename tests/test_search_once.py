"""Multi-query and fan-out are written once (issue 46): a local collection (FAISS + bm25s) and one
Milvus holds (full_text, Milvus Lite) run the same search/spec.py `phrasings` and search/fanout.py
`fused_collections`, so a behaviour planted there reaches both alike. Against the code before
(run.multi_query beside stored.multi_query; fanout._fused_hits beside stored.fused_collections)
both tests fail."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from retriever.search import fanout, spec
from retriever.testing.projects import engine_for

QUERIES = ["How do plants turn sunlight into sugar?", "what causes earthquakes", "stock markets and inflation",
           "black holes and light"]
NOTES = [
    {"id": "n1", "contents": "Quokkas are small wallabies living on Rottnest Island near Perth."},
    {"id": "n2", "contents": "Earthquakes follow the faults where plates meet."},
]


def local_and_held(built_project: Path, root: Path, prefix: str) -> list[tuple[Path, Any, list[str]]]:
    """The sample corpus and a collection of notes, locally (in `root`/local) and in full_text
    collections on Milvus Lite (`root`/held, named `prefix`_...): per side its YAML, an engine, and the
    names of its two collections."""
    out = []
    for side in ("local", "held"):
        shutil.copytree(built_project.parent, root / side)
        path = root / side / "parameter.yaml"
        cfg = yaml.safe_load(path.read_text())
        if side == "held":
            cfg["index_backend"] = "milvus"
            cfg["index_backend_configs"]["milvus"] = {"uri": str(root / "milvus.db"), "full_text": True}
            cfg["collection_name"] = f"{prefix}_{uuid.uuid4().hex[:10]}"
            path.write_text(yaml.safe_dump(cfg))
        e = engine_for(path)
        e.init()
        if side == "held":
            assert e.index()["documents"] == 30
        notes = f"{cfg['collection_name'] or 'c'}_notes"
        e.init(collection_name=notes, corpus_path="")
        e.add(NOTES)
        e.init()
        out.append((path, e, [cfg["collection_name"], notes]))
    return out


@pytest.fixture(scope="module")
def engines(built_project: Path, tmp_path_factory: pytest.TempPathFactory):
    """Each side's engine (local_and_held) with the names of its two collections."""
    return [(e, names) for _, e, names in local_and_held(built_project, tmp_path_factory.mktemp("once"), "once")]


def ids(hits) -> list[list[str]]:
    return [[h.id for h in q] for q in hits]


def test_a_behaviour_planted_in_phrasings_reaches_local_and_held_multi_query(engines, monkeypatch) -> None:
    real = spec.fused_rows

    def first_alone(ids, rankings, method, weights, k, top_k, scales=None):  # the plant: the first phrasing only
        return real(ids, {"0": rankings["0"]}, method, None, k, top_k, scales)

    monkeypatch.setattr(spec, "fused_rows", first_alone)
    for engine, _ in engines:
        got = engine.multi_query_search([QUERIES[:2], QUERIES[2:]], top_k=5, mode="dense")
        assert ids(got) == ids(engine.search([QUERIES[0], QUERIES[2]], top_k=5, mode="dense"))
        assert all(set(h.sources or {}) == {"0"} for q in got for h in q)


def test_a_behaviour_planted_in_fused_collections_reaches_local_and_held_fanout(engines, monkeypatch) -> None:
    real = fanout.fused

    def first_alone(named, method, weights, k, top_k, scales=None):  # the plant: the first collection only
        first = next(iter(named))
        return real({first: named[first]}, method, None, k, top_k, scales)

    for engine, names in engines:
        both, errors = engine.fanout_search(QUERIES, names, top_k=5, mode="dense")
        assert not errors and {h.collection for q in both for h in q} == set(names)
    monkeypatch.setattr(fanout, "fused", first_alone)
    for engine, names in engines:
        got, errors = engine.fanout_search(QUERIES, names, top_k=5, mode="dense")
        assert not errors and {h.collection for q in got for h in q} == {names[0]}
        assert ids(got) == ids(engine.search(QUERIES, top_k=5, mode="dense"))
