"""BM25 results are the documents that share a term with the query, whatever the scoring method."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import engine_for, write_project


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_returns_only_documents_that_share_a_term(tmp_path: Path, method: str) -> None:
    """bm25l and bm25+ score every document above 0: a non-matching one must still not come back."""
    config = write_project(tmp_path / "p", backend="bm25")
    cfg = yaml.safe_load(config.read_text())
    cfg["backend_configs"]["bm25"]["method"] = method
    config.write_text(yaml.safe_dump(cfg))
    e = engine_for(config)
    e.init()
    e.bm25_index(progress=False)
    hits = e.bm25_search(["photosynthesis", "zzzunknownword"], 10)
    assert hits[1] == [] and hits[0] and all("hotosynthesis" in h.text for h in hits[0])
    filtered = e.bm25_search("photosynthesis", 10, filters={"field": "id", "operator": "==", "value": "doc05"})
    assert filtered == [[]] or all(h.id == "doc05" and "hotosynthesis" in h.text for h in filtered[0])
