"""Adds, upserts and deletes against a plain model of the collection (a dict of id -> document),
on FAISS and on Milvus Lite (Hypothesis's rule-based state machine): after every step a dense
search as deep as the collection finds exactly the live documents with their current texts, a
filtered one exactly those the filter keeps, and BM25 nothing the model lacks."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from retriever.testing.projects import SAMPLE, engine_for

BASE = {(r := json.loads(line))["id"]: r for line in SAMPLE.read_text().splitlines() if line.strip()}
IDS = st.sampled_from(["n1", "n2", "n3", "doc01", "doc02", "doc11", "doc29"])
WORDS = st.sampled_from(["quokka", "glacier", "volcano", "sonnet", "enzyme", "orbit"])


def machine(built_project: Path, workdir: Path, backend: str) -> type[RuleBasedStateMachine]:
    class Collection(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            folder = workdir / uuid.uuid4().hex[:8]
            shutil.copytree(built_project.parent, folder)
            config = folder / "parameter.yaml"
            if backend == "milvus":
                cfg = yaml.safe_load(config.read_text())
                cfg["index_backend"] = "milvus"
                cfg["index_backend_configs"]["milvus"] = {"uri": str(folder / "m.db")}
                config.write_text(yaml.safe_dump(cfg))
            self.engine = engine_for(config)
            self.engine.init()
            if backend == "milvus":
                self.engine.index()
            self.model: dict[str, dict[str, Any]] = {k: dict(v) for k, v in BASE.items()}

        @rule(doc_id=IDS, words=st.lists(WORDS, min_size=1, max_size=3), year=st.integers(2000, 2030))
        def add(self, doc_id: str, words: list[str], year: int) -> None:
            doc = {"id": doc_id, "contents": " ".join(words), "year": year}
            report = self.engine.add([doc])
            assert report["replaced"] == (doc_id in self.model)
            self.model[doc_id] = doc

        @rule(ids=st.lists(IDS, min_size=1, max_size=3, unique=True))
        def delete(self, ids: list[str]) -> None:
            report = self.engine.delete(ids)
            assert sorted(report["not_found"]) == sorted(i for i in ids if i not in self.model)
            for i in ids:
                self.model.pop(i, None)

        @rule(year=st.integers(2015, 2031))
        def delete_by_filter(self, year: int) -> None:
            self.engine.delete(filters={"field": "meta.year", "operator": ">=", "value": year})
            self.model = {k: v for k, v in self.model.items() if not v.get("year", 0) >= year}

        @invariant()
        def dense_finds_exactly_the_live_documents(self) -> None:
            hits = self.engine.search(["quokka glacier"], top_k=100, mode="dense")[0]
            assert {h.id: h.text for h in hits} == {k: v["contents"] for k, v in self.model.items()}

        @invariant()
        def a_filter_keeps_exactly_its_documents(self) -> None:
            hits = self.engine.search(["orbit"], top_k=100, filters={"field": "meta.year", "operator": "<",
                                                                    "value": 2019}, mode="dense")[0]
            assert {h.id for h in hits} == {k for k, v in self.model.items() if v.get("year", 9999) < 2019}

        @invariant()
        def bm25_finds_nothing_the_model_lacks(self) -> None:
            if self.engine.bm25 is None:
                return
            for h in self.engine.bm25_search(["quokka glacier volcano"], top_k=100)[0]:
                assert self.model[h.id]["contents"] == h.text

    return Collection


@pytest.mark.parametrize("backend", ["faiss", "milvus"])
def test_writes_match_a_plain_model(built_project: Path, tmp_path: Path, backend: str) -> None:
    Collection = machine(built_project, tmp_path, backend)
    Collection.TestCase.settings = settings(max_examples=6, stateful_step_count=8, deadline=None, database=None,
                                            suppress_health_check=list(HealthCheck), derandomize=True)
    Collection.TestCase().runTest()
