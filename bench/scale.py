"""Scale: `retriever index` and search over a synthetic corpus of N documents (bench/synth.py).

For each N: BM25 build and dense build (`retriever index`, a fresh process each, its peak RSS
sampled every 50 ms), FAISS choices built in process from the embedding file (build time, size,
queries per second, recall@10 against exact), one-query search latency (dense, BM25, hybrid,
through the engine), adding 1,000 documents (time, RSS growth), disk sizes. The embedder is the
static model (runtime: static, the fastest: bench/RESULTS.md "Embedding runtimes").

    .venv/bin/python bench/scale.py 100000 [1000000 ...] [--faiss Flat,HNSW32,IVF1024,Flat] [--queries 200]

Writes the "scale" section of bench/RESULTS.md (and bench/out/scale/N/ keeps the corpus and indexes).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import yaml
from report import write_section
from synth import write as synthesize

ROOT = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent
OUT = ROOT / "bench" / "out" / "scale"


def project(n: int) -> Path:
    folder = OUT / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    if not corpus.exists():
        t = time.perf_counter()
        synthesize(n, corpus, queries=folder / "queries.jsonl")
        print(f"synthesised {n} documents in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg.update(corpus_path="corpus.jsonl", embedding_path="out/embedding.npy", docs_path="out/docs")
    cfg["backend_configs"]["bm25"]["save_path"] = "out/bm25"
    cfg["backend_configs"]["sentence_transformers"]["runtime"] = "static"
    cfg["index_backend_configs"]["faiss"]["index_path"] = "out/faiss"
    (folder / "parameter.yaml").write_text(yaml.safe_dump(cfg))
    return folder / "parameter.yaml"


def measured(cmd: list[str]) -> tuple[dict[str, Any], float, float]:
    """Run `cmd`; its JSON stdout, wall seconds, peak RSS in GB (sampled every 50 ms)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    out = proc.stdout.read() if proc.stdout else ""
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed")
    return json.loads(out), time.perf_counter() - t, peak / 2**30


def size(path: Path) -> float:
    files = [path] if path.is_file() else list(path.rglob("*"))
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**30


def timed_index(vectors: np.ndarray, queries: np.ndarray, factory: str, tuning: dict[str, int],
                k: int) -> tuple[Any, np.ndarray, np.ndarray, float, float]:
    """An index_factory built from `vectors` and searched with `queries` in one batch: the index,
    its rows and scores, build seconds, queries per second."""
    from retriever.indexes.faiss.index import FaissIndex

    t = time.perf_counter()
    index = FaissIndex.build(vectors, 100_000, factory=factory, tuning=tuning)
    build = time.perf_counter() - t
    t = time.perf_counter()
    found, scores = index.search(queries, k)
    return index, found, scores, build, len(queries) / (time.perf_counter() - t)


def recall_at_10(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(found.tolist(), exact.tolist())]))


def faiss_choices(vectors: np.ndarray, queries: np.ndarray, factories: list[str]) -> list[str]:
    """Each index_factory built from the vectors: build s, size, QPS (one batch of queries), recall@10."""
    import faiss
    from retriever.indexes.faiss.index import FaissIndex

    rows = []
    exact = None
    for factory in factories:
        tuning = {"nprobe": 32} if factory.startswith("IVF") else {"efSearch": 64} if factory.startswith("HNSW") else {}
        index, found, _, build, qps = timed_index(vectors, queries, factory, tuning, 10)
        if exact is None:
            exact = found if factory == "Flat" else FaissIndex.build(vectors, 100_000).search(queries, 10)[0]
        recall = recall_at_10(found, exact)
        mb = faiss.serialize_index(index._cpu).nbytes / 2**20
        rows.append(f"| {factory} {tuning or ''} | {build:.1f} | {mb:.0f} | {qps:.0f} | {recall:.3f} |")
    return rows


def latencies(config: Path, queries: list[str]) -> dict[str, str]:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    engine = Retriever(load_config(config), config.parent)
    engine.init()
    out = {}
    for name, fn in (("dense", engine.search), ("bm25", engine.bm25_search), ("hybrid", engine.hybrid_search)):
        times = []
        for q in queries:
            t = time.perf_counter()
            fn([q], 10)
            times.append(time.perf_counter() - t)
        out[name] = f"{statistics.median(times) * 1000:.1f} / {np.percentile(times, 95) * 1000:.1f}"
    docs = [{"id": f"new{i}", "contents": q * 5, "category": "c1"} for i, q in enumerate((queries * 10)[:1000])]
    rss = psutil.Process().memory_info().rss
    t = time.perf_counter()
    engine.add(docs)
    out["add"] = f"{time.perf_counter() - t:.1f} s, +{(psutil.Process().memory_info().rss - rss) / 2**20:.0f} MB RSS"
    return out


def run(n: int, factories: list[str], n_queries: int) -> list[str]:
    config = project(n)
    shutil.rmtree(config.parent / "out", ignore_errors=True)
    cli = [str(BIN / "retriever"), "--log-level", "warning", "index", "--config", str(config), "--mode"]
    bm25, bm25_s, bm25_rss = measured([*cli, "bm25"])
    dense, dense_s, dense_rss = measured([*cli, "dense"])
    queries = [json.loads(line)["text"] for line in (config.parent / "queries.jsonl").read_text().splitlines()]
    queries = queries[:n_queries]
    from retriever.config import load_config
    from retriever.embedders import build_embedder

    vectors = np.load(config.parent / "out" / "embedding.npy", mmap_mode="r")
    qvecs = build_embedder(load_config(config)).encode_queries(queries, "")
    faiss_rows = faiss_choices(vectors, qvecs, factories)
    lat = latencies(config, queries)
    corpus_gb = size(config.parent / "corpus.jsonl")
    return [
        f"### {n:,} documents ({corpus_gb:.2f} GB of JSONL; static model, {vectors.shape[1]} dimensions)",
        "",
        "| step | seconds | peak RSS (GB) | on disk (GB) |",
        "|---|---|---|---|",
        f"| `retriever index --mode bm25` | {bm25_s:.0f} | {bm25_rss:.2f} | {size(config.parent / 'out' / 'bm25'):.2f} |",
        f"| `retriever index --mode dense` (embed + FAISS Flat) | {dense_s:.0f} | {dense_rss:.2f} | "
        f"{size(config.parent / 'out' / 'embedding.npy') + size(config.parent / 'out' / 'faiss'):.2f} |",
        "",
        f"FAISS choices ({len(queries)} queries, one batch; recall@10 against Flat):",
        "",
        "| index_factory (search setting) | build s | size MB | queries/s | recall@10 |",
        "|---|---|---|---|---|",
        *faiss_rows,
        "",
        f"One query at a time, p50 / p95 ms: dense {lat['dense']}, BM25 {lat['bm25']}, hybrid {lat['hybrid']}. "
        f"Adding 1,000 documents: {lat['add']}.",
        "",
        f"(BM25 index report: {bm25['bm25']['documents']:,} documents; dense report: "
        f"{dense['status']['dense_index']:,} vectors.)",
        "",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--faiss", default="Flat,HNSW32,IVF{nlist},Flat,IVF{nlist},PQ32",
                   help="index_factory strings, ';'-free, comma-separated pairs allowed; {nlist} = 4 sqrt(N)")
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args()
    body = ["Produced by `.venv/bin/python bench/scale.py " + " ".join(map(str, args.sizes)) + "` on " +
            f"{psutil.cpu_count()} cores; synthetic corpora from bench/synth.py (Zipfian vocabulary, log-normal "
            "lengths, metadata).", ""]
    for n in args.sizes:
        nlist = 2 ** round(math.log2(4 * math.sqrt(n)))
        factories = [f for f in split_factories(args.faiss.replace("{nlist}", str(nlist)))]
        body += run(n, factories, args.queries)
    write_section("scale", "## Scale\n\n" + "\n".join(body))
    print("\n".join(body), file=sys.stderr)


def split_factories(spec: str) -> list[str]:
    """'Flat,HNSW32,IVF1024,Flat' -> ['Flat', 'HNSW32', 'IVF1024,Flat']: a part after IVF... joins it."""
    out: list[str] = []
    for part in spec.split(","):
        if out and out[-1].startswith("IVF") and "," not in out[-1]:
            out[-1] += "," + part
        else:
            out.append(part)
    return out


if __name__ == "__main__":
    main()
