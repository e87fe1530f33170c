"""Cross-encoder reranking: a stage after retrieval on every search kind, when parameter.yaml's
`rerank` section names a model (run in this process by sentence-transformers' CrossEncoder) or a
rerank server (its `/rerank` wire format: Cohere's, which Infinity, vLLM and Jina speak, or TEI's).

Each query's first `depth` hits (at least top_k) are scored against the query; the hits come back
ordered by that score, highest first (equal scores keep their retrieval order), with the score as
the hit's score. A query whose scoring fails keeps its retrieval order and adds a warning, as the
LLM rerank stage does (llm/tasks.py). Warnings go to the log and to the caller's collector
(`collecting()`), which the reply layer turns into the reply's `warnings`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..config.ranking import RerankConfig
from ..errors import CancelledWork, EmbeddingServerError, LimitError, MissingDependencyError
from ..security.limits import Budget, check_cancel
from ..security.redaction import detail
from ..types import Hit, Hits

log = logging.getLogger(__name__)

_WARNINGS: ContextVar[list[str] | None] = ContextVar("retriever_rerank_warnings", default=None)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """The warnings of the rerank stages run inside the block (a reply's `warnings`)."""
    out: list[str] = []
    token = _WARNINGS.set(out)
    try:
        yield out
    finally:
        _WARNINGS.reset(token)


def _warn(message: str) -> None:
    log.warning("%s", message)
    sink = _WARNINGS.get()
    if sink is not None:
        sink.append(message)


class Scorer(Protocol):
    """Relevance of each text to a query, higher is better (a CrossEncoder's `predict`)."""

    def scores(self, query: str, texts: Sequence[str]) -> list[float]: ...


@functools.lru_cache(maxsize=4)
def _cross_encoder(path: str, max_length: int | None) -> Any:
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as e:
        raise MissingDependencyError("sentence-transformers", "mcp-retriever[torch]") from e
    from ..embedders.sentence_transformers import dtype_kwargs

    return CrossEncoder(path, device="cpu", max_length=max_length, local_files_only=True,
                        model_kwargs=dtype_kwargs())  # not the checkpoint's own dtype


@dataclass(frozen=True)
class InProcess:
    """A sentence-transformers CrossEncoder folder, loaded once per process (and per max_length)."""

    path: str
    batch_size: int = 32
    max_length: int | None = None

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        model = _cross_encoder(self.path, self.max_length)
        out = model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False,
                            convert_to_numpy=True)
        return [float(x) for x in out.reshape(-1)]


@dataclass(frozen=True)
class Server:
    """A rerank server. cohere: POST {url}/rerank {model, query, documents, return_documents}
    answered by {results: [{index, relevance_score}]}; tei: POST {url}/rerank {query, texts,
    raw_scores: false} answered by [{index, score}]. `batch_size` documents per request."""

    url: str
    api: str = "cohere"
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    batch_size: int = 32
    # the requests of one search call (plan() makes a Server per call): rerank.max_requests
    budget: Budget | None = field(default=None, repr=False, compare=False)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            out += self._batch(query, list(texts[start : start + self.batch_size]))
        return out

    def _batch(self, query: str, texts: list[str]) -> list[float]:
        import httpx

        check_cancel("reranking")  # a caller who cancelled or left: nothing more is sent
        if self.budget is not None:
            self.budget.take()

        if self.api == "tei":
            body: dict[str, Any] = {"query": query, "texts": texts, "raw_scores": False, "truncate": True}
        else:
            body = {"query": query, "documents": texts, "return_documents": False, "top_n": len(texts)}
            if self.model:
                body["model"] = self.model
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        endpoint = self.url.rstrip("/") + "/rerank"
        try:
            reply = httpx.post(endpoint, json=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise EmbeddingServerError(f"rerank server {self.url}: {type(e).__name__}: "
                                       f"{detail(str(e), [self.api_key])}") from None
        if reply.status_code != 200:
            raise EmbeddingServerError(f"rerank server {self.url} answered {reply.status_code}: "
                                       f"{detail(reply.text, [self.api_key])}")
        try:
            data = reply.json()
            items = data if self.api == "tei" else data["results"]
            key = "score" if self.api == "tei" else "relevance_score"
            found = {int(item["index"]): float(item[key]) for item in items}
        except (ValueError, KeyError, TypeError) as e:
            raise EmbeddingServerError(f"rerank server {self.url}: an answer not in the {self.api} rerank format "
                                       f"({type(e).__name__}: {detail(str(e), [self.api_key])})") from None
        if sorted(found) != list(range(len(texts))):
            raise EmbeddingServerError(f"rerank server {self.url}: {len(found)} scores for {len(texts)} documents")
        return [found[i] for i in range(len(texts))]


def scorer_of(cfg: RerankConfig) -> Scorer | None:
    """The scorer the YAML's `rerank` section names; None while it names neither model nor URL. A
    server's scorer counts its requests: make one per search call."""
    if cfg.url:
        key = cfg.api_key.get_secret_value() if cfg.api_key is not None else None
        return Server(cfg.url, cfg.api, cfg.model_name, key, cfg.timeout, cfg.batch_size,
                      Budget("rerank requests", "rerank.max_requests", cfg.max_requests))
    if cfg.model_name_or_path:
        return InProcess(cfg.model_name_or_path, cfg.batch_size, cfg.max_length)
    return None


def reranked(scorer: Scorer, query: str, hits: Sequence[Hit]) -> list[Hit]:
    """`hits` ordered by the scorer's score for each (highest first; ties in retrieval order), the
    score as each hit's score."""
    scores = scorer.scores(query, [h.text for h in hits])
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    return [replace(hits[i], score=scores[i]) for i in order]


def rerank(scorer: Scorer, queries: Sequence[str], hits: Hits, depth: int, k: int) -> Hits:
    """Per query, its first `depth` hits reranked (the rest after them, as they were), cut to `k`.
    A query whose scoring fails keeps its retrieval order, with a warning."""
    out, spent, kept = [], None, 0
    for query, found in zip(queries, hits):
        head, tail = list(found[:depth]), list(found[depth:])
        check_cancel("reranking")
        try:
            head = reranked(scorer, query, head) if head and spent is None else head
        except CancelledWork:
            raise
        except LimitError as e:  # the call's requests are spent: no more are sent
            spent = e
        except Exception as e:  # noqa: BLE001 - any failure of the model or server keeps the retrieval order
            _warn(f"reranking failed for {query[:200]!r}, the retrieval order kept: {type(e).__name__}: {e}")
        kept += spent is not None
        out.append((head + tail)[:k])
    if spent is not None:
        _warn(f"{spent}: {kept} of {len(queries)} queries keep their retrieval order")
    return out


@dataclass(frozen=True)
class Plan:
    """How a search runs with the rerank stage: `depth` hits retrieved per query, reranked, cut to k."""

    scorer: Scorer
    depth: int

    def retrieve(self, k: int) -> int:
        return max(k, self.depth)

    def apply(self, queries: Sequence[str], hits: Hits, k: int) -> Hits:
        return rerank(self.scorer, queries, hits, self.retrieve(k), k)


def plan(cfg: RerankConfig, multimodal: bool = False) -> Plan | None:
    """The rerank stage of a collection's searches, or None (no rerank section, or images: a
    cross-encoder reads text)."""
    scorer = scorer_of(cfg)
    if scorer is None:
        return None
    if multimodal:
        _warn("rerank: this collection holds images (is_multimodal); the cross-encoder reads text, so the retrieval "
              "order is kept")
        return None
    return Plan(scorer, cfg.depth)


def after(p: Plan | None, queries: Sequence[str], hits: Hits, k: int) -> Hits:
    """`hits` through the stage `p` (None: as they are)."""
    return hits if p is None else p.apply(queries, hits, k)
