"""BM25 beside its library (issue 46): SciFact's 5,183 passages, the 300 test queries, top 10.
Ours is `Retriever.bm25_search` (tokenize, bm25s's per-term scores summed, the top k of the
documents that share a term, the collection's hits with their id, text and metadata); raw is bm25s
called directly on the same index and tokenizer: its `retrieve` (the library's own search call), and
the floor of its `get_scores_from_ids` + a partial sort (no hits, no text). One query per call
(median per query) and all 300 in one call (queries/s); the sides in turn, `--rounds` rounds,
medians of the rounds. The load average at the start is written beside the figures: on a shared
machine compare the ratios of one run. Writes section `bm25-raw` of bench/RESULTS.md.

    .venv/bin/python bench/bm25_raw.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from report import ROOT, SCIFACT, scifact_queries, write_section


def engine(folder: Path):  # type: ignore[no-untyped-def]
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    cfg = load_config(ROOT / "parameter.yaml", {
        "corpus_path": str(SCIFACT / "corpus.jsonl"), "embedding_path": str(folder / "embedding.npy"),
        "docs_path": str(folder / "docs"), "index_backend_configs": {"faiss": {"index_path": str(folder / "faiss")}},
        "backend_configs": {"bm25": {"save_path": str(folder / "bm25")}}})
    e = Retriever(cfg, ROOT)
    e.init()
    e.bm25_index(progress=False)
    return e


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    queries = scifact_queries(300)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        e = engine(Path(tmp))
        index = e.session.bm25
        model, tok = index._model, index._tokenizer

        def ids(qs: list[str]) -> list[list[int]]:
            return tok.tokenize(qs, update_vocab=False, return_as="ids", show_progress=False)

        def floor(qs: list[str]) -> None:
            for q in ids(qs):
                scores = model.get_scores_from_ids(q)
                top = np.argpartition(-scores, 10)[:10]
                top[np.argsort(-scores[top])]

        sides: dict[str, Callable[[list[str]], object]] = {
            "ours: Retriever.bm25_search": lambda qs: e.bm25_search(qs, top_k=10),
            "bm25s: retrieve": lambda qs: model.retrieve(ids(qs), k=10, show_progress=False),
            "bm25s: get_scores_from_ids + partial sort (the floor: no hits, no text)": floor,
        }
        got = e.bm25_search(queries[:3], top_k=10)
        raw = model.retrieve(ids(queries[:3]), k=10, show_progress=False)
        for ours, theirs in zip(got, raw.documents if hasattr(raw, "documents") else raw[0]):
            assert len(ours) == len(theirs), "the two sides return different numbers of hits"
        single: dict[str, list[float]] = {k: [] for k in sides}
        batch: dict[str, list[float]] = {k: [] for k in sides}
        for fn in sides.values():  # warm
            fn(queries[:20])
        for _ in range(args.rounds):
            for name, fn in sides.items():
                single[name].append(statistics.median(timed(lambda q=q, fn=fn: fn([q])) for q in queries))
                batch[name].append(len(queries) / timed(lambda fn=fn: fn(queries)))
    ref = "bm25s: retrieve"
    one = {k: statistics.median(v) * 1000 for k, v in single.items()}
    many = {k: statistics.median(v) for k, v in batch.items()}
    # against the reference in the same round (the sides ran one after the other): a load that
    # comes and goes on a shared machine moves both sides of a round, not the difference or ratio
    one_vs = {k: statistics.median(a - b for a, b in zip(v, single[ref])) * 1000 for k, v in single.items()}
    many_vs = {k: statistics.median(a / b for a, b in zip(v, batch[ref])) for k, v in batch.items()}
    cpu = sorted({f for f in open("/proc/cpuinfo").read().split() if f in ("avx2", "avx512_bf16", "avx512_vnni",
                                                                             "amx_bf16")})
    lines = ["## BM25 beside its library (bench/bm25_raw.py)", "",
             f"SciFact ({len(e.session.bm25)} passages), 300 test queries, top 10, on {platform.machine()} with "
             f"{os.cpu_count()} cores ({', '.join(cpu)}), load average {load:.1f} at the start (shared: compare the "
             f"ratios); the sides in turn, {args.rounds} rounds, medians; each \"vs\" is the median over the rounds "
             "of the difference or ratio to bm25s retrieve in that round. "
             "Goals (issue 46): one query within +0.05 ms of raw bm25s, a batch at least 0.8x its throughput.", "",
             "| side | one query per call, ms (median) | vs bm25s retrieve | 300 in one call, queries/s | vs bm25s retrieve |",
             "|---|---|---|---|---|"]
    for name in sides:
        lines.append(f"| {name} | {one[name]:.3f} | {one_vs[name]:+.3f} ms | {many[name]:,.0f} | {many_vs[name]:.2f}x |")
    body = "\n".join(lines) + "\n"
    write_section("bm25-raw", body)
    print(body, file=sys.stderr)


if __name__ == "__main__":
    main()
