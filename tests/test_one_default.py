"""Every search surface defaults to the same kind (search/kinds.py DEFAULT_MODE, hybrid) and gives
the same hits and scores for the same query: the library, `retriever search`, the deploy service's
/search request and the agent's MCP `search` (whose scores are the library's with scale_score)."""

from pathlib import Path
from typing import Any

from conftest import MCP, cli_json
from retriever.api.hits import hits
from retriever.api.models import DeploySearchRequest
from retriever.search.kinds import DEFAULT_MODE

Q = "what causes tides"


def ranked(row: Any) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 4)) for h in row]


def test_every_surface_defaults_to_hybrid_with_the_same_scores(built: Any, built_project: Path) -> None:
    assert DEFAULT_MODE == "hybrid"
    library = ranked(built.search(Q, top_k=3)[0])
    assert library == ranked(built.search(Q, top_k=3, mode="hybrid")[0]) != ranked(built.search(Q, 3, mode="dense")[0])
    cli = cli_json("search", "--config", str(built_project), "-k", "3", "--json", Q)
    assert [(h["id"], round(h["score"], 4)) for h in cli] == library
    deploy = DeploySearchRequest(query_list=[Q], top_k=3).as_search(built.default_mode())
    assert deploy.kind == "hybrid" and ranked(hits(built, deploy)[0]) == library
    got = MCP(built).ok("search", {"query": Q, "top_k": 3})["results"][0]["hits"]
    assert [(h["id"], round(h["score"], 4)) for h in got] == ranked(built.search(Q, top_k=3, scale_score=True)[0])


def test_a_collection_without_bm25_answers_a_search_that_names_no_mode_with_dense(project: Path) -> None:
    """The default is the best kind the collection answers: a corpus only embedded (or a Milvus
    collection in demo mode) has no BM25 index, so a search that names no mode is dense there, on
    the library, the CLI and the deploy request alike, where an explicit hybrid says what is missing."""
    import pytest
    from conftest import engine_for
    from retriever.errors import IndexMissingError

    e = engine_for(project)
    e.init()
    e.embed(progress=False)
    e.index()
    assert e.default_mode() == "dense"
    assert ranked(e.search(Q, top_k=3)[0]) == ranked(e.search(Q, top_k=3, mode="dense")[0])
    assert DeploySearchRequest(query_list=[Q], top_k=3).as_search(e.default_mode()).kind == "dense"
    cli = cli_json("search", "--config", str(project), "-k", "3", "--json", Q)
    assert [h["id"] for h in cli] == [i for i, _ in ranked(e.search(Q, top_k=3)[0])]
    with pytest.raises(IndexMissingError, match="BM25"):
        e.search(Q, top_k=3, mode="hybrid")
