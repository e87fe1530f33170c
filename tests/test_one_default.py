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
    deploy = DeploySearchRequest(query_list=[Q], top_k=3).as_search()
    assert deploy.kind == "hybrid" and ranked(hits(built, deploy)[0]) == library
    got = MCP(built).ok("search", {"query": Q, "top_k": 3})["results"][0]["hits"]
    assert [(h["id"], round(h["score"], 4)) for h in got] == ranked(built.search(Q, top_k=3, scale_score=True)[0])
