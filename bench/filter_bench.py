"""Filtered search through the engine's own paths on SciFact: FAISS (exact, ID-selector bitmap
over the filter's row mask) and BM25 (masked scores), against the same searches unfiltered.

The corpus is SciFact with a synthetic `bucket = row % 100` field; the filter keeps bucket 7
(1% of the corpus). Vectors are the cached MiniLM embeddings of bench/milvus_bench.py (query
embedding time excluded: it is the same with and without a filter). Also timed: building the
filter's row mask once (it is cached per filter afterwards) and the top-k check that every hit
matches and all k come back.

    .venv/bin/python bench/filter_bench.py     # prints a markdown table to stdout
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
from milvus_bench import OUT, SCIFACT, embed
from retriever.config import BM25Config
from retriever.filters import parse
from retriever.indexes.bm25 import BM25Index
from retriever.indexes.faiss.index import FaissIndex
from retriever.store.corpus import CorpusFile

ROOT = Path(__file__).resolve().parents[1]

K, BUCKET = 10, 7
FILTER = {"field": "meta.bucket", "operator": "==", "value": BUCKET}


def bucket_corpus() -> Path:
    path = OUT / "scifact_bucket.jsonl"
    with (SCIFACT / "corpus.jsonl").open() as src, path.open("w") as out:
        for row, line in enumerate(src):
            out.write(json.dumps({**json.loads(line), "bucket": row % 100}) + "\n")
    return path


def ms(fn, items) -> list[float]:
    fn(items[0])  # warm up
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    _, _, docs, queries = embed()
    store = CorpusFile.open(bucket_corpus())
    query_texts = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").open()][:300]
    faiss = FaissIndex.build(docs, 10000)
    bm25 = BM25Index.build(store.texts(), BM25Config(), show_progress=False)
    f = parse(FILTER)
    t = time.perf_counter()
    mask = store.mask(f)
    mask_ms = (time.perf_counter() - t) * 1000
    cached = ms(lambda _: store.mask(f), [0] * 20)
    rows = {
        "FAISS exact": (ms(lambda q: faiss.search(q[None, :], K), queries),
                        ms(lambda q: faiss.search(q[None, :], K, mask), queries)),
        "BM25": (ms(lambda q: bm25.search([q], K), query_texts), ms(lambda q: bm25.search([q], K, mask), query_texts)),
    }
    ok_dense = all(len(r) == K and all(x % 100 == BUCKET for x in r.tolist())
                   for r in faiss.search(queries, K, mask)[0])
    ok_bm25 = all(all(x % 100 == BUCKET for x in r.tolist()) for r in bm25.search(query_texts, K, mask)[0])
    print(f"{len(store)} documents, filter keeps {int(mask.sum())} ({mask.mean():.1%}); {len(queries)} dense and "
          f"{len(query_texts)} BM25 queries one at a time, k={K}; median / p95 ms\n")
    print("| retriever | unfiltered | filtered (1%) | every hit matches (FAISS: all k returned) |")
    print("| --- | ---: | ---: | :---: |")
    for name, (plain, filtered) in rows.items():
        ok = ok_dense if name.startswith("FAISS") else ok_bm25
        print(f"| {name} | {statistics.median(plain):.2f} / {np.percentile(plain, 95):.2f} "
              f"| {statistics.median(filtered):.2f} / {np.percentile(filtered, 95):.2f} | {'yes' if ok else 'NO'} |")
    print(f"\nRow mask for a new filter: {mask_ms:.0f} ms once (one pass over the corpus), then "
          f"{statistics.median(cached) * 1000:.1f} us from the cache.")


if __name__ == "__main__":
    main()
