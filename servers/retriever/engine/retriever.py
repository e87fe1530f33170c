"""Retriever: init / embed / index / search / bm25. The engine knows nothing of MCP.

Every method takes the UltraRAG tool arguments; an argument left as None takes the value from
parameter.yaml, for that call only. The searches are here; the session's lifecycle (`init`, the
reloads, the write locks) is lifecycle.py's and the writes (builds, add, ingest, sync, delete) are
writes.py's, both inherited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import load_config
from ..errors import InvalidInputError
from ..filters import parse as parse_filter
from ..search import DEFAULT_MODE, Ranker, kinds, run, stored
from ..search.fanout import fanout
from ..search.hybrid import hybrid_options
from ..search.results import as_queries, check_top_k, pick, search_groups
from ..search.spec import Spec
from ..security import visibility
from ..session import Session
from ..types import Document, Hit
from .collections import listed
from .documents import documents_of
from .writes import Writes

RowRankings = tuple[Sequence[np.ndarray], Sequence[np.ndarray]]  # per query: rows best first, scores


class Retriever(Writes):
    @classmethod
    def from_yaml(cls, path: str | Path = "parameter.yaml") -> Retriever:
        return cls(load_config(path), Path(path).resolve().parent)

    def _k(self, s: Session, top_k: int | None) -> int:
        return check_top_k(pick(top_k, s.config.top_k))

    def search(self, query_list: str | Sequence[str], top_k: int | None = None,
               query_instruction: str | None = None, score_threshold: float | None = None,
               scale_score: bool = False, filters: dict[str, Any] | None = None,
               collection_name: str | None = None, ann: dict[str, int] | None = None, mode: str | None = None,
               **fusion: Any) -> list[list[Hit]]:
        """A search of kind `mode` (search/kinds.py: hybrid, dense, bm25, sparse; None: the best the
        collection answers, `default_mode`: hybrid where it has both indexes), per query its top
        `top_k` hits. `scale_score` maps scores to 0..1 (each kind's
        own map); `score_threshold` drops hits below it (after scaling, if asked); `filters` (see
        filters.py) limits the candidates before the top k is taken; `collection_name` searches that
        collection (None: the current one); `ann` sets an ANN index's nprobe / efSearch for this
        call (None: the YAML's); `fusion` (fusion, vector_weight, rrf_k, candidate_depth) sets
        hybrid's options for this call."""
        s = self.searched("search", collection_name)
        ranker = self._ranker(s, mode or self.default_mode(s), query_instruction, ann, fusion)
        spec = Spec(ranker, as_queries(query_list), self._k(s, top_k),
                    None if filters is None else parse_filter(filters), scale_score, score_threshold)
        return documents_of(s).search(s, spec)  # where the session's documents live (documents.py)

    def default_mode(self, s: Session | None = None) -> str:
        """The mode a search that names none runs (the library's, `retriever search`'s, the deploy
        service's /search): hybrid (search/kinds.py DEFAULT_MODE, the best we have) where the
        collection answers it, else the kind it has: dense without a BM25 index (a Milvus collection
        in demo mode, a corpus only embedded), bm25 without an embedding model."""
        s = s or self.session
        if s is None:
            return DEFAULT_MODE
        text = documents_of(s).text_documents(s) is not None
        if s.embedder is None:
            return "bm25"
        if s.dense is None and s.held is None:
            return "bm25" if text else DEFAULT_MODE  # nothing to search: hybrid's error names both indexes
        return DEFAULT_MODE if text else "dense"

    def _ranker(self, s: Session, mode: str, query_instruction: str | None, ann: dict[str, int] | None,
                fusion: dict[str, Any]) -> Ranker:
        """The kind `mode` names with this call's options (search/kinds.py), checked against the session."""
        k = kinds.of(mode)
        given = {name: value for name, value in fusion.items() if value is not None}
        if given and kinds.FUSION not in k.options:
            raise InvalidInputError(f"{', '.join(sorted(given))} apply to mode 'hybrid', not {mode!r}")
        h = hybrid_options(s.config.hybrid, **given) if given else s.config.hybrid
        return kinds.kind(mode, h, query_instruction, ann)

    def batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                     query_instruction: str | None = None, score_threshold: float | None = None,
                     scale_score: bool = False, filters: dict[str, Any] | None = None,
                     collection_name: str | None = None, ann: dict[str, int] | None = None) -> list[list[list[Hit]]]:
        """One search over every query of every group, split back into the groups."""
        return search_groups(
            lambda qs: self.search(qs, top_k, query_instruction, score_threshold, scale_score, filters,
                                   collection_name, ann, mode="dense"), batch_query_list)

    # ---- BM25 ------------------------------------------------------------------------------

    def bm25_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                    score_threshold: float | None = None, scale_score: bool = False,
                    filters: dict[str, Any] | None = None, collection_name: str | None = None) -> list[list[Hit]]:
        """BM25 search (`search` with mode bm25). `scale_score` maps scores to 0..1 with expit(s / 8)."""
        return self.search(query_list, top_k, None, score_threshold, scale_score, filters, collection_name,
                           mode="bm25")

    # ---- learned sparse (search/learned_sparse.py) ---------------------------------------------

    def sparse_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                      score_threshold: float | None = None, scale_score: bool = False,
                      filters: dict[str, Any] | None = None, collection_name: str | None = None) -> list[list[Hit]]:
        """Learned-sparse search (`search` with mode sparse). `scale_score` maps scores to 0..1 with expit(s / 8)."""
        return self.search(query_list, top_k, None, score_threshold, scale_score, filters, collection_name,
                           mode="sparse")

    # ---- documents read by id, collections listed ----------------------------------------------

    def fetcher(self, tool: str, collection_name: str | None = None) -> Callable[[Sequence[str]], dict[str, Document]]:
        """Reads documents by id where the session's documents live (documents.py)."""
        s = self.searched(tool, collection_name)
        return lambda ids: documents_of(s).get(s, ids)

    def list_collections(self) -> dict[str, Any]:
        """Every collection of the configured store: its documents, model, dimension, indexes."""
        found = listed(self.config)
        if visibility.rule(self.config) is not None:  # a caller that sees only some documents: no counts
            found = [{k: v for k, v in c.items() if k == "dimension" or isinstance(v, bool) or not isinstance(v, int)}
                     | {"documents": None} for c in found]
        return {"collections": found}

    # ---- hybrid, multi-query, fan-out (search/) ----------------------------------------------

    def hybrid_search(self, query_list: str | Sequence[str], top_k: int | None = None,
                      query_instruction: str | None = None, fusion: str | None = None,
                      vector_weight: float | None = None, rrf_k: float | None = None,
                      candidate_depth: int | None = None, score_threshold: float | None = None,
                      scale_score: bool = False, filters: dict[str, Any] | None = None,
                      collection_name: str | None = None, ann: dict[str, int] | None = None) -> list[list[Hit]]:
        """Dense and BM25 at once, each `candidate_depth` deep, fused per query (see fusion.py):
        `search` with mode hybrid. Each hit carries its rank and score in each retriever.
        `scale_score` divides by the best possible fused score; `ann` as in `search`."""
        return self.search(query_list, top_k, query_instruction, score_threshold, scale_score, filters,
                           collection_name, ann, mode="hybrid", fusion=fusion, vector_weight=vector_weight,
                           rrf_k=rrf_k, candidate_depth=candidate_depth)

    def hybrid_batch_search(self, batch_query_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                            **options: Any) -> list[list[list[Hit]]]:
        return search_groups(lambda qs: self.hybrid_search(qs, top_k, **options), batch_query_list)

    def multi_query_search(self, question_list: Sequence[str | Sequence[str]], top_k: int | None = None,
                           mode: str = DEFAULT_MODE, query_instruction: str | None = None,
                           candidate_depth: int | None = None, score_threshold: float | None = None,
                           scale_score: bool = False, filters: dict[str, Any] | None = None) -> list[list[Hit]]:
        """Several phrasings per question, each searched `candidate_depth` deep with `mode`
        (dense, bm25 or hybrid), fused with RRF (k from the YAML) into one ranking per question."""
        s = self.need("retriever_multi_query_search")
        h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
        ranker, f = kinds.kind(mode, h, query_instruction, s=s), None if filters is None else parse_filter(filters)
        if s.held is not None:  # the backend holds the documents: its hits fused by id (search/stored.py)
            held = s.held
            return stored.multi_query(s, lambda qs: kinds.held_search(s, held, Spec(ranker, qs, h.candidate_depth, f,
                                                                                     reranked=False)),
                                      question_list, self._k(s, top_k), h.rrf_k, scale_score, score_threshold)
        return run.multi_query(s, ranker, question_list, self._k(s, top_k), h.candidate_depth, h.rrf_k, f,
                               scale_score, score_threshold)

    def searched(self, tool: str, collection_name: str | None) -> Session:
        """The session a search reads: the current one, or collection `collection_name`'s."""
        return self.need(tool) if collection_name is None else self.collection_session(collection_name, tool)

    def check_opened(self, tool: str, collection_name: str | None, corpus_path: str | None) -> None:
        """A call that names the collection or the corpus it works on (as UltraRAG's do) names the
        ones retriever_init opened."""
        s = self.need(tool)
        if collection_name is not None and collection_name != s.config.collection_name:
            raise InvalidInputError(f"{tool} works on the collection retriever_init opened "
                                    f"({s.config.collection_name!r}), not {collection_name!r}; call retriever_init "
                                    "with that collection_name first")
        if corpus_path and s.config.corpus_path is not None:
            given = self._path(corpus_path, s.config.corpus_path, "corpus_path").resolve()
            if given != s.config.corpus_path.resolve():
                raise InvalidInputError(f"{tool} works on the corpus retriever_init opened ({s.config.corpus_path}), "
                                        f"not {given}; call retriever_init with that corpus_path first")

    def collection_session(self, name: str, tool: str = "retriever_fanout_search") -> Session:
        """The session of collection `name` ("" = the default): the current one, or one opened with
        the current settings and model (kept until the next retriever_init)."""
        s = self.need(tool)
        return s if name == s.config.collection_name else self._others.session(self.base_config, self.base_dir, name, s)

    def fanout_search(self, query_list: str | Sequence[str], collections: Sequence[str], top_k: int | None = None,
                      mode: str = DEFAULT_MODE, query_instruction: str | None = None, candidate_depth: int | None = None,
                      filters: dict[str, Any] | None = None, score_threshold: float | None = None,
                      scale_score: bool = False) -> tuple[list[list[Hit]], dict[str, str]]:
        """One search over several collections, fused with RRF (see search/fanout.py)."""
        s = self.need("retriever_fanout_search")
        h = hybrid_options(s.config.hybrid, candidate_depth=candidate_depth)
        return fanout(self.collection_session, as_queries(query_list), collections, self._k(s, top_k), h, mode,
                      query_instruction, filters, score_threshold, scale_score)
