"""A collection's knowledge graph: (subject, relation, object) triples the LLM extracted from its
documents, each kept with the document it came from, and the hops of a graph search over them.

The graph is one JSON file beside the collection's change log (`<docs folder>/../graph.json`),
written to a temporary name and renamed, with the model that extracted it. Entities are matched by
their lower-cased text. A hop follows the triples that share an entity with the last hop's, scored
by the cosine of the query to the triple's text ("subject relation object"), the best `beam` kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import IndexMissingError
from ..store.persist import atomic_write_text
from ..types import Hit

Triple = tuple[str, str, str]


def graph_path(docs_folder: Path) -> Path:
    return docs_folder.with_name("graph.json")


@dataclass(frozen=True)
class Graph:
    docs: tuple[str, ...]  # the document of each triple
    triples: tuple[Triple, ...]
    model: str

    def save(self, path: Path) -> None:
        rows = [{"doc": d, "triple": list(t)} for d, t in zip(self.docs, self.triples)]
        atomic_write_text(path, json.dumps({"format": 1, "model": self.model, "triples": rows}, ensure_ascii=False))

    @classmethod
    def load(cls, path: Path) -> Graph:
        if not path.is_file():
            raise IndexMissingError(f"no knowledge graph at {path}: call retriever_extract_triples first")
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["triples"]
        return cls(tuple(r["doc"] for r in rows), tuple(tuple(r["triple"]) for r in rows), data["model"])

    def merged(self, docs: list[str], found: list[list[Triple]], model: str) -> Graph:
        """This graph with `docs`' triples replaced by `found`."""
        replaced = set(docs)
        keep = [(d, t) for d, t in zip(self.docs, self.triples) if d not in replaced]
        keep += [(d, t) for d, ts in zip(docs, found) for t in ts]
        return Graph(tuple(d for d, _ in keep), tuple(t for _, t in keep), model)


def entities(t: Triple) -> set[str]:
    return {t[0].lower(), t[2].lower()}


def hops(graph: Graph, vectors: np.ndarray, query: np.ndarray, seed_docs: list[str], n_hops: int,
         beam: int) -> list[tuple[int, int, float]]:
    """(hop, triple index, score) of the triples each hop keeps, best first within a hop."""
    by_entity: dict[str, list[int]] = {}
    for i, t in enumerate(graph.triples):
        for e in entities(t):
            by_entity.setdefault(e, []).append(i)
    seeds = set(seed_docs)
    frontier = {e for d, t in zip(graph.docs, graph.triples) if d in seeds for e in entities(t)}
    used: set[int] = {i for i, d in enumerate(graph.docs) if d in seeds}
    scores = vectors @ query if len(vectors) else np.empty(0)
    out: list[tuple[int, int, float]] = []
    for hop in range(1, n_hops + 1):
        candidates = sorted({i for e in frontier for i in by_entity.get(e, []) if i not in used})
        if not candidates:
            break
        kept = sorted(candidates, key=lambda i: (-float(scores[i]), i))[:beam]
        out += [(hop, i, float(scores[i])) for i in kept]
        used.update(kept)
        frontier = {e for i in kept for e in entities(graph.triples[i])}
    return out


def graph_hits(seed: list[Hit], graph: Graph, reached: list[tuple[int, int, float]], hit_of: Any,
               top_k: int) -> list[Hit]:
    """The seed hits (hop 0), then each document a hop reached, in hop order, with the hop and the
    triple that reached it in its metadata; `hit_of(doc_id, score)` makes a hit (None: deleted)."""
    out = [replace(h, metadata={**h.metadata, "hop": 0}) for h in seed]
    have = {h.id for h in out}
    for hop, i, score in reached:
        doc = graph.docs[i]
        if doc in have:
            continue
        hit = hit_of(doc, score)
        if hit is not None:
            have.add(doc)
            out.append(replace(hit, metadata={**hit.metadata, "hop": hop, "triple": list(graph.triples[i])}))
    return out[:top_k]
