"""One battery of contract tests for every vector index backend (the model: Haystack's
`testing/document_store.py`). A backend's tests are a short subclass of `IndexContract` that says
how to select it in parameter.yaml, whether it is exact and which ANN settings a search may set.

The battery builds a small collection through the engine (the real model, the backend's own
build), then drives the backend's `VectorIndex` directly with vectors whose true neighbours numpy
computes: exact top-k, filters applied before top-k, snapshots unchanged by later writes, ANN
settings refused where they do not apply, save and load, a mismatched saved index refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from retriever import Retriever
from retriever.errors import IndexMismatchError, InvalidInputError
from retriever.filters import parse
from retriever.testing.projects import engine_for, write_project

GROUPS = ("alpha", "beta", "gamma")
TOPICS = ("rivers and lakes", "mountain climbing", "bread baking", "jazz music", "solar power", "chess openings",
          "bird migration", "ancient Rome", "volcanoes", "coffee brewing", "tidal energy", "glass making")


def corpus(n: int = 150) -> list[dict[str, Any]]:
    return [{"id": f"d{i:03d}", "contents": f"Note {i} on {TOPICS[i % len(TOPICS)]}, part {i // len(TOPICS)}.",
             "group": GROUPS[i % 3], "n": i} for i in range(n)]


class IndexContract:
    """Subclass and set `overrides` (parameter.yaml keys selecting the backend)."""

    overrides: ClassVar[dict[str, Any]] = {}
    exact: ClassVar[bool] = True  # exact search: rows and scores equal numpy's
    ann: ClassVar[tuple[str, ...]] = ()  # the ANN settings a search may set (FAISS's names: nprobe, efSearch)
    min_recall: ClassVar[float] = 0.9  # an approximate index's recall@10 against numpy
    # isolated: a snapshot answers as it did, whatever is written later (FAISS: appends past its rows).
    # shared: the vectors live in a server every snapshot reads (Milvus): a snapshot never returns a row
    # it does not know, and a deleted document leaves it too.
    snapshots: ClassVar[str] = "isolated"

    @pytest.fixture
    def built(self, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Retriever, Path]:
        source = tmp_path / "source.jsonl"
        source.write_text("".join(json.dumps(d) + "\n" for d in corpus()), encoding="utf-8")
        config = write_project(tmp_path, source, **self.project_overrides(tmp_path, request))
        engine = engine_for(config)
        engine.init()
        engine.embed(progress=False)
        engine.index()
        return engine, config

    def project_overrides(self, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
        return dict(self.overrides)

    # ---- helpers --------------------------------------------------------------------------

    @staticmethod
    def vectors(engine: Retriever) -> np.ndarray:
        return np.load(engine.session.config.paths().embedding)

    @staticmethod
    def queries(vectors: np.ndarray, n: int = 6) -> np.ndarray:
        """Nearby points that are no document's vector: true neighbours without exact ties."""
        q = vectors[:n] + np.random.default_rng(7).normal(0, 0.05, (n, vectors.shape[1])).astype(np.float32)
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    @staticmethod
    def truth(vectors: np.ndarray, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[list[int]]:
        scores = queries @ vectors.T
        if allowed is not None:
            scores[:, ~allowed] = -np.inf
        return [[int(r) for r in np.argsort(-row, kind="stable")[:k] if np.isfinite(row[r])] for row in scores]

    def check(self, got: Any, want: list[list[int]], k: int) -> None:
        rows = [list(map(int, r)) for r in got]
        if self.exact:
            assert rows == want
        else:
            recall = np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(rows, want)])
            assert recall >= self.min_recall, recall

    # ---- the contract ----------------------------------------------------------------------

    def test_top_k_against_numpy(self, built: tuple[Retriever, Path]) -> None:
        engine, _ = built
        vectors = self.vectors(engine)
        index = engine.session.dense
        queries = self.queries(vectors)
        rows, scores = index.search(queries, 10)
        self.check(rows, self.truth(vectors, queries, 10), 10)
        for r, s, q in zip(rows, scores, queries):
            assert list(s) == sorted(s, reverse=True)
            if self.exact:
                np.testing.assert_allclose(s, vectors[np.asarray(r, dtype=np.int64)] @ q, atol=1e-4)

    def test_filters_apply_before_top_k(self, built: tuple[Retriever, Path]) -> None:
        """Only 1 document in 3 passes: post-filtering a top-10 would return about 3 hits, not 10."""
        engine, _ = built
        vectors = self.vectors(engine)
        f = parse({"field": "meta.group", "operator": "==", "value": "gamma"})
        allowed = np.array([GROUPS[i % 3] == "gamma" for i in range(len(vectors))])
        queries = self.queries(vectors)
        rows, _ = engine.session.dense.search(queries, 10, allowed, f)
        assert all(len(r) == 10 and allowed[np.asarray(r, dtype=np.int64)].all() for r in rows)
        self.check(rows, self.truth(vectors, queries, 10, allowed), 10)

    def test_a_snapshot_is_unchanged_by_later_writes(self, built: tuple[Retriever, Path]) -> None:
        engine, _ = built
        vectors = self.vectors(engine)
        queries = self.queries(vectors)
        old = engine.session.dense
        before = [list(map(int, r)) for r in old.search(queries, 10)[0]]
        engine.add([{"id": f"new{i}", "contents": d["contents"], "group": "gamma"} for i, d in enumerate(corpus(6))])
        engine.delete(ids=["d000", "d001"])
        new = engine.session.dense
        assert new is not old
        after = [list(map(int, r)) for r in old.search(queries, 10)[0]]
        if self.snapshots == "isolated":
            assert after == before and len(old) == len(vectors)
        else:
            for was, now in zip(before, after):
                assert max(now) < len(vectors) and not {0, 1} & set(now)  # no new row; the deleted gone
                kept = [r for r in was if r not in (0, 1)]  # a new document may take a slot: it is left out
                assert now[: min(len(now), len(kept))] == kept[: min(len(now), len(kept))]
        rows, _ = new.search(queries[:1], 3)
        assert int(rows[0][0]) == engine.session.collection.row_of["new0"], rows  # d000's text again, as a new row

    @pytest.mark.parametrize("setting", ["nprobe", "efSearch"])
    def test_ann_settings_are_refused_where_they_do_not_apply(self, built: tuple[Retriever, Path], setting: str) -> None:
        engine, _ = built
        queries = self.queries(self.vectors(engine), 2)
        if setting in self.ann:
            rows, _ = engine.session.dense.search(queries, 5, ann={setting: 16})
            assert all(len(r) == 5 for r in rows)
        else:
            with pytest.raises(InvalidInputError, match=setting.lower() if setting == "nprobe" else "ef"):
                engine.session.dense.search(queries, 5, ann={setting: 16})

    def test_saved_and_loaded(self, built: tuple[Retriever, Path]) -> None:
        engine, config = built
        vectors = self.vectors(engine)
        queries = self.queries(vectors)
        want = engine.session.dense.search(queries, 10)
        self.release(engine)
        again = engine_for(config)
        again.init()
        got = again.session.dense.search(queries, 10)
        assert [list(map(int, r)) for r in got[0]] == [list(map(int, r)) for r in want[0]]
        np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), atol=1e-5)

    def test_a_mismatched_saved_index_is_refused(self, built: tuple[Retriever, Path]) -> None:
        """The corpus under a saved index changed: loading it names the mismatch (no silent wrong rows)."""
        engine, config = built
        self.release(engine)
        source = config.parent / "corpus.jsonl"
        source.write_text("".join(json.dumps(d) + "\n" for d in corpus(140)), encoding="utf-8")
        with pytest.raises(IndexMismatchError):
            engine_for(config).init()

    def release(self, engine: Retriever) -> None:
        """Let another engine open what this one holds (Milvus Lite: one process handle per file)."""
