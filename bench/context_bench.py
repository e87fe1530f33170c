"""Should a chunk's indexed text carry its document's title (a cheap form of contextual
retrieval)? SciFact's abstracts cut into sentences (pysbd, the title left out of the text), each
sentence indexed alone or as "<title>\\n<sentence>", searched 1,000 deep and merged to documents
by their best sentence; document-level nDCG@10 and Recall@100 on the 300 test queries, dense,
BM25 and hybrid. Writes section `context` of bench/RESULTS.md.

    .venv/bin/python bench/context_bench.py          # minutes: every sentence is embedded twice
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from report import ROOT, SCIFACT, write_section

OUT = ROOT / "bench" / "out" / "context"


def corpora() -> dict[str, Path]:
    from retriever.documents.split import units

    OUT.mkdir(parents=True, exist_ok=True)
    paths = {"sentence alone": OUT / "plain.jsonl", "title + sentence": OUT / "context.jsonl"}
    if all(p.exists() for p in paths.values()):
        return paths
    with paths["sentence alone"].open("w") as plain, paths["title + sentence"].open("w") as ctx:
        for line in (SCIFACT / "corpus.jsonl").open():
            rec = json.loads(line)
            text, title = rec.get("text") or "", rec.get("title") or ""
            for n, (s, e) in enumerate(units(text, "sentence")):
                sentence = text[s:e]
                plain.write(json.dumps({"id": f"{rec['_id']}:{n}", "contents": sentence}) + "\n")
                ctx.write(json.dumps({"id": f"{rec['_id']}:{n}", "contents": f"{title}\n{sentence}"}) + "\n")
    return paths


def built(corpus: Path, name: str, under: Path = OUT) -> Any:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    out = under / name
    cfg = load_config(ROOT / "parameter.yaml", {
        "corpus_path": str(corpus), "embedding_path": str(out / "embedding.npy"), "docs_path": str(out / "docs"),
        "index_backend_configs": {"faiss": {"index_path": str(out / "faiss")}},
        "backend_configs": {"bm25": {"save_path": str(out / "bm25")}}, "overwrite": True})
    e = Retriever(cfg, ROOT)
    e.init()
    if e.dense is None:
        e.embed(progress=False)
        e.index()
    if e.bm25 is None:
        e.bm25_index(progress=False)
    return e


def best_per_document(hits: list[Any], k: int) -> list[tuple[str, float]]:
    best: dict[str, float] = {}
    for h in hits:
        doc = h.id.rsplit(":", 1)[0]
        if doc not in best:
            best[doc] = h.score
    return sorted(best.items(), key=lambda x: -x[1])[:k]


def main() -> None:
    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    texts = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    queries = [texts[q] for q in qids]
    rows, build = [], {}
    for name, corpus in corpora().items():
        t = time.perf_counter()
        e = built(corpus, name.split()[0])
        build[name] = time.perf_counter() - t
        for mode, search in (("bm25", e.bm25_search), ("dense", partial(e.search, mode="dense")), ("hybrid", e.hybrid_search)):
            run = {q: best_per_document(hits, 100) for q, hits in zip(qids, search(queries, 1000))}
            m = evaluate(run, qrels)
            rows.append((mode, name, m["ndcg@10"], m["recall@100"]))
    rows.sort()
    table = [f"| {mode} | {name} | {n:.4f} | {r:.4f} |" for mode, name, n, r in rows]
    body = "\n".join([
        "## A chunk's text with its document's title (bench/context_bench.py)", "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run: SciFact's abstracts cut into sentences (title left out), "
        "each indexed alone or after its title, searched 1,000 deep, merged to documents by their best sentence; 300 "
        f"test queries (build {', '.join(f'{k}: {v:.0f} s' for k, v in build.items())}).", "",
        "| mode | indexed text | nDCG@10 | Recall@100 |", "|---|---|---|---|", *table])
    write_section("context", body)
    print(body)


if __name__ == "__main__":
    main()
