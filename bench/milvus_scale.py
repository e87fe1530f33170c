"""A Milvus 2.3.5 standalone server at scale: HNSW over bench/scale.py's N-document corpus.

The vectors are those `retriever index` embedded (bench/out/scale/N/out/embedding.npy, static
model); ids, texts and metadata come from the corpus. MilvusStore (the code `index_backend:
milvus` runs) creates the collection with an HNSW index (M 16, efConstruction 128), upserts
`--chunk` rows per call (insert rate, then the wait until the server has indexed and loaded them),
and answers `--queries` of the corpus's queries (bench/synth.py, embedded with the same model)
one at a time (median / p95 ms) at ef 64 and ef 256, with recall@10 against exact inner product
(numpy over the same vectors; FAISS's HNSW gets the same recall on these invented-word vectors,
whose 10th and 11th scores differ by 0.0004 at the median: a floor for ANN recall).

The server listens on every interface, so it runs in a private network namespace:

    .venv/bin/python bench/scale.py 1000000          # once: corpus and embedding file
    make milvus-server
    unshare --net --fork sh -c 'ip link set lo up && .venv/bin/python bench/milvus_scale.py 1000000'

Writes the "milvus-scale" section of bench/RESULTS.md and prints it to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from report import write_section

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "bench" / "out" / "scale"


def corpus_rows(path: Path):  # noqa: ANN201 - (ids, texts, metadatas) a chunk at a time
    ids, texts, metas = [], [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(d.pop("id"))
            texts.append(d.pop("contents"))
            metas.append(d)
            if len(ids) == 10_000:
                yield ids, texts, metas
                ids, texts, metas = [], [], []
    if ids:
        yield ids, texts, metas


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("size", type=int)
    p.add_argument("--chunk", type=int, default=2000)
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args()
    from retriever.indexes.milvus.store import MilvusStore
    from retriever.testing.milvus_server import running_milvus_server

    folder = OUT / str(args.size)
    vectors = np.load(folder / "out" / "embedding.npy", mmap_mode="r")
    from retriever.config import load_config
    from retriever.embedders import build_embedder

    texts = [json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines()][:args.queries]
    queries = np.ascontiguousarray(build_embedder(load_config(folder / "parameter.yaml")).encode_queries(texts, ""),
                                   dtype=np.float32)
    exact = np.empty((len(queries), 10), np.int64)
    scores = np.full((len(queries), 10), -np.inf, np.float32)
    for start in range(0, len(vectors), 100_000):  # exact top 10, a block of rows at a time
        block = queries @ np.asarray(vectors[start:start + 100_000]).T
        both = np.concatenate([scores, block], axis=1)
        rows = np.concatenate([exact, np.broadcast_to(np.arange(start, start + block.shape[1]), block.shape)], axis=1)
        best = np.argsort(-both, axis=1, kind="stable")[:, :10]
        exact, scores = np.take_along_axis(rows, best, 1), np.take_along_axis(both, best, 1)
    with tempfile.TemporaryDirectory() as tmp, running_milvus_server(Path(tmp)) as uri:
        store = MilvusStore(uri, None, "scale", index_params={"index_type": "HNSW", "metric_type": "IP",
                                                              "params": {"M": 16, "efConstruction": 128}},
                            chunk=args.chunk)
        store.create(int(vectors.shape[1]), {"model": "static", "bench": "milvus_scale"})
        t, done = time.perf_counter(), 0
        for ids, texts, metas in corpus_rows(folder / "corpus.jsonl"):
            store.upsert(ids, np.asarray(vectors[done:done + len(ids)]), texts, metas)
            done += len(ids)
            if done % 100_000 == 0:
                print(f"{done:,} rows, {done / (time.perf_counter() - t):,.0f}/s", file=sys.stderr)
        insert_s = time.perf_counter() - t
        t = time.perf_counter()
        assert store.count() == done  # the first Strong read: waits until the server has the rows
        store._client.flush("scale")
        while True:  # the HNSW graphs of every sealed segment
            index = store._client.describe_index("scale", store.fields.vector)
            if int(index.get("indexed_rows", 0)) >= done or time.perf_counter() - t > 3600:
                break
            time.sleep(2)
        store._client.release_collection("scale")
        store._client.load_collection("scale")  # loads the sealed segments with their HNSW graphs
        ready_s = time.perf_counter() - t
        ids_to_row = None
        lines = []
        for ef in (64, 256):
            times, found = [], []
            for q in queries:
                t = time.perf_counter()
                hits = store.search(q[None, :], 10, ann={"efSearch": ef})[0]
                times.append(time.perf_counter() - t)
                found.append([h[0] for h in hits])
            if ids_to_row is None:
                ids_to_row = {}
                for row, line in enumerate((folder / "corpus.jsonl").open(encoding="utf-8")):
                    ids_to_row[line[8:line.index('"', 8)]] = row  # lines start with {"id": "
            recall = np.mean([len({ids_to_row[i] for i in f} & set(e.tolist())) / 10 for f, e in zip(found, exact)])
            lines.append(f"| HNSW M16 efConstruction 128, ef {ef} | {statistics.median(times) * 1000:.1f} / "
                         f"{np.percentile(times, 95) * 1000:.1f} | {recall:.3f} |")
        store.drop()
        store.close()
    body = [
        f"Produced by `unshare --net --fork sh -c 'ip link set lo up && .venv/bin/python bench/milvus_scale.py "
        f"{args.size}'` on the shared 2-core machine: Milvus 2.3.5 standalone (PyPI `milvus`), {done:,} documents "
        f"of bench/synth.py with their static-model vectors ({vectors.shape[1]} dimensions), texts and metadata.",
        "",
        f"Insert through MilvusStore.upsert ({args.chunk:,} rows a call): {insert_s:.0f} s, "
        f"{done / insert_s:,.0f} documents/s; then flush, index and load: {ready_s:.0f} s.",
        "",
        f"| index, search setting | one query p50 / p95 ms ({len(queries)} queries, k 10) | recall@10 vs exact |",
        "|---|---|---|",
        *lines,
        "",
    ]
    write_section("milvus-scale", "## Milvus server at scale\n\n" + "\n".join(body))
    print("\n".join(body), file=sys.stderr)


if __name__ == "__main__":
    main()
