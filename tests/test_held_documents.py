"""Where the index backend holds the documents (Milvus Lite, full_text and is_demo), the reads and
writes that used to read the local collection reach Milvus: get_document (with its neighbours),
retriever_get_neighbors, and ingest replacing a source's chunks from an earlier version."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from conftest import MCP
from retriever.testing.projects import engine_for


@pytest.fixture(params=["full_text", "is_demo"])
def held(request: pytest.FixtureRequest, built_project: Path, tmp_path: Path) -> MCP:
    cfg = yaml.safe_load(built_project.read_text())
    cfg.update(index_backend="milvus", collection_name=f"held_{uuid.uuid4().hex[:10]}", corpus_path=None,
               chunking={"by": "sentence", "length": 10, "overlap": 0, "levels": []})
    cfg["index_backend_configs"]["milvus"] = {"uri": str(tmp_path / "milvus.db"), request.param: True}
    if request.param == "is_demo":
        cfg["index_backend_configs"]["milvus"] = {"uri": str(tmp_path / "milvus.db")}
        cfg["is_demo"] = True
    path = tmp_path / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    engine = engine_for(path)
    engine.init()
    return MCP(engine)


TEXT = ("Quokkas live on Rottnest Island. " * 12 + "They are small wallabies. " * 12 + "Tourists take selfies. " * 12)


def test_ingest_get_document_and_neighbours_read_the_backend(held: MCP) -> None:
    first = held.ok("retriever_ingest", {"source_id": "q", "text": TEXT, "metadata": {"kind": "animal"}})
    assert len(first["ids"]) >= 3 and first["removed"] == 0
    got = held.ok("get_document", {"ids": [first["ids"][1], "nope"], "around": 1})
    assert got["missing"] == ["nope"]
    [doc] = got["documents"]
    assert doc["id"] == first["ids"][1] and doc["metadata"]["kind"] == "animal"
    assert doc["context"]["ids"] == first["ids"][:3]
    around = held.ok("retriever_get_neighbors", {"id": first["ids"][1], "before": 1, "after": 1})
    assert around["ids"] == first["ids"][:3]
    hit = held.ok("search", {"query": "small wallabies", "mode": "dense", "top_k": 1, "window": 1})["results"][0]["hits"][0]
    i = first["ids"].index(hit["id"])
    assert hit["metadata"]["window_ids"] == first["ids"][max(0, i - 1): i + 2]  # read from the backend
    again = held.ok("retriever_ingest", {"source_id": "q", "text": "Quokkas live on Rottnest Island."})
    assert again["ids"] == ["q:0"] and again["removed"] == len(first["ids"]) - 1
    assert held.ok("get_document", {"ids": first["ids"]})["missing"] == first["ids"][1:]
