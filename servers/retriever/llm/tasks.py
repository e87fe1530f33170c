"""What the LLM is asked, and how its answers are checked. Each task returns its result and the
warnings of what failed; a failure leaves the input as it was (the query, the ranking), never an
empty or invented list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError, LLMError
from ..filters import parse as parse_filter
from ..types import Hit
from .client import ChatClient
from .prompts import numbered, render

Ranked = list[Hit]  # one query's hits


def _field(answer: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(answer, dict) or not isinstance(answer.get(key), kind):
        raise LLMError(f"{what}: the answer has no {key!r} of the expected kind (got {str(answer)[:200]})")
    return answer[key]


def rewrite(llm: ChatClient, queries: list[str], n: int, hint: list[str] | None = None) -> tuple[list[list[str]], list[str]]:
    """`n` rewrites per query (distinct, not the query itself); the query alone where the LLM failed."""
    prompts = [render(llm.cfg, "rewrite", n=n, query=q, hint=f" The last search missed: {h}." if h else "")
               for q, h in zip(queries, hint or [""] * len(queries))]
    out, warnings = [], []
    for query, answer in zip(queries, llm.ask_all(prompts)):
        try:
            if isinstance(answer, LLMError):
                raise answer
            found = _field(answer, "queries", list, "rewrite")
            clean = list(dict.fromkeys(q.strip() for q in found if isinstance(q, str) and q.strip()))
            clean = [q for q in clean if q != query][:n]
            if not clean:
                raise LLMError(f"rewrite: no usable query in the answer (got {str(answer)[:200]})")
            out.append(clean)
        except LLMError as e:
            warnings.append(f"query rewriting failed for {query!r}, kept as it is: {e}")
            out.append([query])
    return out, warnings


@dataclass(frozen=True)
class Judgement:
    sufficient: bool
    confidence: float
    missing: str

    def as_dict(self) -> dict[str, Any]:
        return {"sufficient": self.sufficient, "confidence": self.confidence, "missing": self.missing}


def judge(llm: ChatClient, query: str, passages: list[str]) -> Judgement:
    """Whether `passages` answer `query` (raises LLMError: the caller stops the rounds)."""
    answer = llm.ask(render(llm.cfg, "judge", query=query, passages=numbered(passages)))
    sufficient = _field(answer, "sufficient", bool, "judge")
    confidence = answer.get("confidence", 1.0 if sufficient else 0.0)
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool) or not 0 <= confidence <= 1:
        raise LLMError(f"judge: confidence must be a number from 0 to 1, got {confidence!r}")
    missing = answer.get("missing") if isinstance(answer.get("missing"), str) else ""
    return Judgement(sufficient, float(confidence), missing)


def rerank(llm: ChatClient, queries: list[str], hits: list[Ranked], method: str, depth: int,
           batch_size: int) -> tuple[list[Ranked], list[str]]:
    """Each query's first `depth` hits in the model's order; the hits after them kept behind, in
    their order. A query whose rerank fails keeps its ranking, with a warning."""
    if method not in RERANKERS:
        raise InvalidInputError(f"llm_rerank.method must be one of {sorted(RERANKERS)}, got {method!r}")
    out, warnings = [], []
    for query, ranked in zip(queries, hits):
        seen, rest = ranked[:depth], ranked[depth:]
        try:
            out.append(RERANKERS[method](llm, query, seen, batch_size) + rest)
        except LLMError as e:
            warnings.append(f"LLM reranking failed for {query!r}, the retrieval order kept: {e}")
            out.append(ranked)
    return out, warnings


def _order(answer: Any, n: int) -> list[int]:
    """The 0-based positions the model ranked (valid, each once), then the ones it left out."""
    order = _field(answer, "order", list, "listwise rerank")
    picked = [int(i) - 1 for i in order if isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n]
    picked = list(dict.fromkeys(picked))
    if not picked:
        raise LLMError(f"listwise rerank: no valid passage number in {str(order)[:200]}")
    return picked + [i for i in range(n) if i not in picked]


def listwise(llm: ChatClient, query: str, hits: Ranked, batch_size: int) -> Ranked:
    """RankGPT's sliding window: windows of `batch_size` from the bottom up, half a window a step,
    so the best of each window climbs into the next."""
    ranked = list(hits)
    step = max(batch_size // 2, 1)
    start = max(len(ranked) - batch_size, 0)
    while True:
        window = ranked[start : start + batch_size]
        answer = llm.ask(render(llm.cfg, "rerank_listwise", query=query, passages=numbered([h.text for h in window])))
        ranked[start : start + batch_size] = [window[i] for i in _order(answer, len(window))]
        if start == 0:
            return ranked
        start = max(start - step, 0)


def pointwise(llm: ChatClient, query: str, hits: Ranked, batch_size: int) -> Ranked:
    """Each hit scored 0..10 (`batch_size` per request); sorted by that score, ties in retrieval
    order; each hit's score becomes the model's."""
    batches = [hits[i : i + batch_size] for i in range(0, len(hits), batch_size)]
    prompts = [render(llm.cfg, "rerank_pointwise", query=query, passages=numbered([h.text for h in b])) for b in batches]
    scored: list[tuple[float, int, Hit]] = []
    for batch, answer in zip(batches, llm.ask_all(prompts)):
        if isinstance(answer, LLMError):
            raise answer
        scores = _field(answer, "scores", list, "pointwise rerank")
        if len(scores) != len(batch) or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
            raise LLMError(f"pointwise rerank: expected {len(batch)} numbers, got {str(scores)[:200]}")
        scored += [(float(s), len(scored) + i, h) for i, (s, h) in enumerate(zip(scores, batch))]
    return [h.rescored(s) for s, _, h in sorted(scored, key=lambda t: (-t[0], t[1]))]


RERANKERS = {"listwise": listwise, "pointwise": pointwise}


def triples(llm: ChatClient, texts: list[str]) -> list[list[tuple[str, str, str]] | LLMError]:
    """Each text's (subject, relation, object) triples, or why none could be had."""
    out: list[list[tuple[str, str, str]] | LLMError] = []
    for answer in llm.ask_all([render(llm.cfg, "triples", text=t) for t in texts]):
        try:
            if isinstance(answer, LLMError):
                raise answer
            found = _field(answer, "triples", list, "triples")
            out.append([(str(t[0]).strip(), str(t[1]).strip(), str(t[2]).strip()) for t in found
                        if isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t)])
        except LLMError as e:
            out.append(e)
    return out


def infer_filter(llm: ChatClient, query: str, description: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The filter the query implies (checked by the filter parser), or None with a warning."""
    try:
        answer = llm.ask(render(llm.cfg, "filters", query=query, description=description or "(not described)"))
        if not isinstance(answer, dict) or "filter" not in answer:
            raise LLMError(f"filters: the answer has no 'filter' (got {str(answer)[:200]})")
        found = answer["filter"]
        if found is None:
            return None, []
        parse_filter(found)
        return found, []
    except LLMError as e:
        return None, [f"filter inference failed for {query!r}: {e}"]
    except InvalidInputError as e:
        return None, [f"filter inference for {query!r} gave an invalid filter, none used: {e}"]
