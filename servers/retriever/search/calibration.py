"""The dense share of hybrid fusion when `hybrid.vector_weight` is left to auto (null): a
self-retrieval check of the collection, no labels needed.

PROBES documents (a fixed sample of the live ones) each give a pseudo-query: WORDS consecutive
words of their own text. Each retriever searches them; its MRR@10 at finding the source says
whether it can read this corpus at all. Spans favour BM25 (exact words), so the check only acts
when one retriever falls below half the other's MRR: the dense share is then that ratio (the
BM25 share, for a failing BM25), at least FLOOR; otherwise 0.5. On SciFact the ratio is 0.69
(0.5 kept); on bench/synth.py's invented words, which the packaged model cannot read, 0.19
(bench/QUALITY.md).

The result is kept beside the BM25 index (`<bm25 folder>.calibration.json`), keyed by the
collection, its corpus file (without one: its size, to a power of two), the model and the BM25
settings, so it is measured once per corpus at the first hybrid search, not after each add; a read-only
server (security.read_only, `serve --read-only`, `retriever deploy`: Retriever.serve_read_only) or
one that cannot write there keeps it for the process only.

A restricted caller (security.visibility: `seen`) gets the check run over what it sees only: the
probes drawn from its visible documents, both retrievers searching those with BM25's statistics of
those (indexes/bm25_visible.py), kept in memory per visibility rule and never written, so its weight
is what the same documents alone would give and no hidden document moves it (issue 47). It costs one
check per rule, at its first hybrid search.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..session import Allowed
from ..store.manifests import corpus_manifest
from ..store.persist import atomic_write_text

if TYPE_CHECKING:
    from ..session import Seen, Session

log = logging.getLogger(__name__)

PROBES, WORDS, SEED, FLOOR = 200, 16, 0, 0.05
_WORD = re.compile(r"\w+")


def vector_weight(dense_mrr: float, bm25_mrr: float) -> float:
    """0.5 unless one retriever finds under half of what the other finds: then the weak one's
    share is its MRR over the other's (at least FLOOR)."""
    best = max(dense_mrr, bm25_mrr)
    if best <= 0:
        return 0.5
    if dense_mrr < 0.5 * best:
        return max(FLOOR, dense_mrr / best)
    if bm25_mrr < 0.5 * best:
        return 1.0 - max(FLOOR, bm25_mrr / best)
    return 0.5


def pseudo_queries(s: Session, seen: Seen | None = None) -> tuple[list[str], list[int]]:
    """WORDS consecutive words of each of PROBES live documents (fixed seed; `seen`: those it holds),
    and their rows."""
    live = s.collection.live_rows() if seen is None else np.flatnonzero(seen.rows)
    rng = np.random.default_rng(SEED)
    rows = np.sort(rng.choice(live, size=min(PROBES, len(live)), replace=False)) if len(live) else live
    queries, kept = [], []
    for row in rows.tolist():
        words = _WORD.findall(s.collection.get(row).text)
        if not words:
            continue
        start = int(rng.integers(0, max(1, len(words) - WORDS + 1)))
        queries.append(" ".join(words[start:start + WORDS]))
        kept.append(row)
    return queries, kept


def _mrr(found: Any, rows: list[int]) -> float:
    ranks = [np.flatnonzero(np.asarray(f) == r) for f, r in zip(found, rows)]
    return float(np.mean([1.0 / (int(x[0]) + 1) if len(x) else 0.0 for x in ranks])) if rows else 0.0


Rows = Callable[..., tuple[Any, Any]]  # a retriever kind's rows(s, queries, depth, allowed)


def measure(s: Session, dense_rows: Rows, bm25_rows: Rows, seen: Seen | None = None) -> dict[str, Any]:
    """Run the check: both retrievers over the pseudo-queries, top 10, live documents only (`seen`:
    those it holds, with its statistics)."""
    queries, rows = pseudo_queries(s, seen)
    live = Allowed(s.collection.allowed(None), None) if seen is None else Allowed(seen.rows, None, seen)
    dense = _mrr(dense_rows(s, queries, 10, live)[0], rows) if queries else 0.0
    bm25 = _mrr(bm25_rows(s, queries, 10, live)[0], rows) if queries else 0.0
    return {"dense_mrr": round(dense, 4), "bm25_mrr": round(bm25, 4),
            "vector_weight": round(vector_weight(dense, bm25), 4), "probes": len(queries), "words": WORDS}


def _key(s: Session) -> str:
    bm25 = s.config.backend_configs.bm25
    model = s.embedder.model_id if s.embedder is not None else None
    # a collection made only of added documents has no corpus file: measured again when its size
    # doubles, not after every add
    contents = corpus_manifest(s.docs) if s.docs is not None else {"size_class": len(s.collection).bit_length()}
    return json.dumps({"collection": str(s.config.paths().bm25), "contents": contents, "model": model,
                       "lang": bm25.lang, "tokenizer": bm25.tokenizer, "method": bm25.method, "k1": bm25.k1,
                       "b": bm25.b, "probes": PROBES, "words": WORDS, "seed": SEED}, sort_keys=True, default=str)


def auto_vector_weight(s: Session, dense_rows: Rows, bm25_rows: Rows, seen: Seen | None = None) -> float:
    """The calibrated dense share for this collection: from memory, the file, or measured now
    with the two retrievers' `rows`; for a restricted caller (`seen`) over what it sees, in memory only."""
    key, memo = _key(s), s.learned.calibration  # kept with the session (session.Learned)
    if seen is not None:
        return _seen_vector_weight(s, dense_rows, bm25_rows, seen, json.dumps({"of": key, "seen": seen.key}))
    with s.learned.calibration_lock:
        if key in memo:
            return float(memo[key]["vector_weight"])
        path = Path(str(s.config.paths().bm25) + ".calibration.json")
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("key") == key:
                memo[key] = saved
                return float(saved["vector_weight"])
        except (OSError, ValueError):
            pass
        found = {**measure(s, dense_rows, bm25_rows), "key": key}
        memo[key] = found
        log.info("hybrid vector_weight auto: %s (dense MRR %s, BM25 MRR %s over %s pseudo-queries)",
                 found["vector_weight"], found["dense_mrr"], found["bm25_mrr"], found["probes"])
        if s.config.security.read_only:  # a read-only server writes nothing
            return float(found["vector_weight"])
        try:
            atomic_write_text(path, json.dumps(found, indent=2, sort_keys=True))
        except OSError as e:
            log.debug("calibration kept in memory only (%s)", e)
        return float(found["vector_weight"])


def _seen_vector_weight(s: Session, dense_rows: Rows, bm25_rows: Rows, seen: Seen, key: str) -> float:
    """The check over the documents `seen` holds, kept in memory under `key` (never in the file, which
    holds the collection's)."""
    memo = s.learned.calibration
    with s.learned.calibration_lock:
        if key not in memo:
            memo[key] = {**measure(s, dense_rows, bm25_rows, seen), "key": key}
            log.info("hybrid vector_weight auto over a visibility rule's documents: %s (%s pseudo-queries)",
                     memo[key]["vector_weight"], memo[key]["probes"])
        return float(memo[key]["vector_weight"])
