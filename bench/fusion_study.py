"""Fusion candidates across development sets (issue 17): which hybrid never loses to its parts?

Sets (BEIR form; dense = the packaged all-MiniLM-L6-v2 through the engine, exact FAISS; BM25 =
bm25s, the server's defaults):

- `scifact-train`: BEIR SciFact, the 809 train claims (data/scifact; CC BY-NC 2.0, BEIR).
- `scifact-titles`: known-item search over SciFact abstracts *without their titles*, 1,000
  titles (fixed seed) as queries, each relevant to its own abstract: another task on the same
  texts, where dense and BM25 are close.
- `synth`: 5,000 documents of bench/synth.py (this project's generator; invented words, where the
  packaged model knows none of them and BM25 is far stronger: the inverse of the issue's
  entity set), 1,000 queries of 3-6 words of one document each.
- `scifact-test`: the 300 test claims, reported once, for the chosen default only.

Every candidate fuses the same two 1000-deep runs, cached under bench/out/fusion/ (the runs,
the query vectors and the documents' vectors for Rocchio feedback). Writes bench/QUALITY.md's
"fusion-study" section and prints it.

    .venv/bin/python bench/fusion_study.py [--sets scifact-train scifact-titles synth] [--test]
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from report import judged, write_section

ROOT = Path(__file__).resolve().parents[1]

SCIFACT = ROOT / "data" / "scifact"
OUT = ROOT / "bench" / "out" / "fusion"
DEPTH = 1000
Ranking = list[tuple[str, float]]


# ---- sets -----------------------------------------------------------------------------------

def _scifact_titles(folder: Path) -> None:
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    rng = np.random.default_rng(17)
    picked = sorted(rng.choice(len(docs), 1000, replace=False).tolist())
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": d["_id"], "contents": d["text"]}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for i in picked:
            f.write(json.dumps({"_id": f"t{i}", "text": docs[i]["title"]}) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                      "".join(f"t{i}\t{docs[i]['_id']}\t1\n" for i in picked))


def _synth(folder: Path) -> None:
    from synth import write

    write(5000, folder / "corpus.jsonl", seed=3, queries=folder / "queries.jsonl", n_queries=1000)
    (folder / "queries.qrels.tsv").rename(folder / "qrels.tsv")


def materialise(name: str) -> tuple[Path, Path, Path]:
    """(corpus, queries, qrels) of a set, written under bench/out/fusion/<name>/ when made here."""
    if name.startswith("scifact-") and name in ("scifact-train", "scifact-test"):
        return SCIFACT / "corpus.jsonl", SCIFACT / "queries.jsonl", SCIFACT / "qrels" / f"{name[8:]}.tsv"
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "qrels.tsv").exists():
        {"scifact-titles": _scifact_titles, "synth": _synth}[name](folder)
    return folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.tsv"


def engine_for(name: str) -> Any:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    corpus, _, _ = materialise(name)
    # SciFact: the indexes `make eval-scifact` builds (index/scifact/), else built here once
    index = ROOT / "index" / "scifact" if name in ("scifact-train", "scifact-test") else OUT / name / "index"
    overrides = {"corpus_path": str(corpus), "embedding_path": str(index / "embedding.npy"),
                 "docs_path": str(index / "docs"),
                 "index_backend_configs": {"faiss": {"index_path": str(index / "faiss")}},
                 "backend_configs": {"bm25": {"save_path": str(index / "bm25")}}}
    engine = Retriever(load_config(ROOT / "parameter.yaml", overrides), ROOT)
    engine.init()
    if engine.dense is None:
        engine.embed(progress=False)
        engine.index()
    if engine.bm25 is None:
        engine.bm25_index(progress=False)
    return engine


def auto_prior(name: str) -> dict[str, Any]:
    """The server's self-retrieval check (calibration.py) on the set's corpus; cached."""
    cache = OUT / f"{name}.auto.json"
    if not cache.exists():
        from retriever.search.calibration import measure
        from retriever.search.rankers import BM25, Dense

        s = engine_for(name).session
        cache.write_text(json.dumps(measure(s, Dense().rows, BM25().rows)))
    return json.loads(cache.read_text())


def runs(name: str) -> dict[str, Any]:
    """Dense and BM25 runs (1000 deep), query vectors, doc vectors, BM25 idf bounds; cached."""
    cache = OUT / f"{name}.runs.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    _, queries_path, qrels_path = materialise(name)
    engine = engine_for(name)
    qids, qrels, qtexts = judged(queries_path, qrels_path)
    dense = engine.search(qtexts, DEPTH, mode="dense")
    bm25 = engine.bm25_search(qtexts, DEPTH)
    s = engine.session
    qvecs = s.embedder.encode_queries(qtexts, "")
    bounds = [bm25_bound(s.bm25, t) for t in qtexts]
    out = {"qids": qids, "qrels": qrels, "dense": [[(h.id, h.score) for h in r] for r in dense],
           "bm25": [[(h.id, h.score) for h in r] for r in bm25], "qvecs": qvecs,
           "doc_ids": list(s.collection.ids), "bounds": bounds, "embedding": str(s.config.paths().embedding)}
    cache.write_bytes(pickle.dumps(out))
    return out


def bm25_bound(index: Any, text: str) -> float:
    """The highest BM25 score any document could reach for the query (lucene: tfc < 1, so the
    sum of the query terms' idf)."""
    tokens = index.tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0]
    n = index.documents
    return math.fsum(math.log(1 + (n - df + 0.5) / (df + 0.5)) for df in map(index.df, tokens) if df > 0)


# ---- candidates -------------------------------------------------------------------------------

def _combine(parts: list[dict[str, float]], weights: list[float], missing: list[float]) -> Ranking:
    keys = set().union(*parts)
    fused = {k: sum(w * p.get(k, m) for p, w, m in zip(parts, weights, missing)) for k in keys}
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:100]


def rrf(d: Ranking, b: Ranking, w: float = 0.5, k: float = 60, depth: int = 1000) -> Ranking:
    """The server's RRF (retriever.search.fusion)."""
    from retriever.search.fusion import fuse

    return fuse("rrf", [d[:depth], b[:depth]], [w, 1 - w], k, limit=100)


def convex(d: Ranking, b: Ranking, w: float = 0.5, depth: int = 500) -> Ranking:
    """The server's convex combination of min-max scores (retriever.search.fusion)."""
    from retriever.search.fusion import fuse

    return fuse("convex", [d[:depth], b[:depth]], [w, 1 - w], limit=100)


def minmax(x: Ranking, lo: float) -> dict[str, float]:
    """Min-max from a theoretical minimum `lo` to the observed best (TM2C2; the server's minmax
    takes the observed minimum)."""
    if not x:
        return {}
    span = x[0][1] - lo
    return {k: (s - lo) / span if span > 0 else 1.0 for k, s in x}


def zscore(d: Ranking, b: Ranking, w: float = 0.5, depth: int = 500) -> Ranking:
    parts, missing = [], []
    for x in (d[:depth], b[:depth]):
        s = np.array([v for _, v in x]) if x else np.zeros(1)
        mu, sd = float(s.mean()), float(s.std()) or 1.0
        parts.append({k: (v - mu) / sd for k, v in x})
        missing.append(float((s.min() - mu) / sd))
    return _combine(parts, [w, 1 - w], missing)


def tm2c2(d: Ranking, b: Ranking, w: float = 0.5, depth: int = 500) -> Ranking:
    """Theoretical min (cosine -1, BM25 0), observed max (Bruch et al.'s TM2C2)."""
    return _combine([minmax(d[:depth], -1.0), minmax(b[:depth], 0.0)], [w, 1 - w], [0, 0])


def bounded(d: Ranking, b: Ranking, bound: float, w: float = 0.5, depth: int = 500, bm25_floor: bool = False) -> Ranking:
    """Both on absolute scales: cosine as is, BM25 over the query's highest possible score. A
    query whose best BM25 match holds little of its idf mass leans on dense by itself."""
    parts = [{k: s for k, s in d[:depth]}, {k: s / bound for k, s in b[:depth]} if bound > 0 else {}]
    floor = min((s / bound for _, s in b[:depth]), default=0) if bm25_floor and bound > 0 else 0
    return _combine(parts, [w, 1 - w], [min((s for _, s in d[:depth]), default=0), floor])


def complete(d: Ranking, b: Ranking, x: dict[str, Any], w: float = 0.5, depth: int = 500) -> Ranking:
    """`bounded` over the union of both lists with every candidate's exact cosine (its vector is
    at hand), so no score is imputed for a BM25 find that dense ranked below its depth."""
    keys = {k for k, _ in d[:depth]} | {k for k, _ in b[:depth]}
    rows = np.array([x["row_of"][k] for k in keys])
    cos = dict(zip(keys, (x["vectors"][rows] @ x["qvec"]).tolist()))
    bm = {k: s / x["bound"] for k, s in b[:depth]} if x["bound"] > 0 else {}
    return _combine([cos, bm], [w, 1 - w], [0, 0])


def peaked(d: Ranking, b: Ranking, bound: float, n: int = 10, lo: float = 0.2, hi: float = 0.8,
           depth: int = 500, bm25_floor: bool = False, power: float = 1.0) -> Ranking:
    """`bounded` with a per-query weight: each retriever's peak (its best score minus its n-th,
    on the absolute scales) shares the weight, clipped to lo..hi: a list that singles out its
    top documents counts more than a flat one."""
    def peak(x: Ranking, scale: float) -> float:
        return (x[0][1] - x[min(n, len(x)) - 1][1]) / scale if len(x) > 1 and scale > 0 else 0.0

    pd, pb = peak(d, 1.0) ** power, peak(b, bound) ** power
    w = 0.5 if pd + pb <= 0 else min(hi, max(lo, pd / (pd + pb)))
    return bounded(d, b, bound, w, depth, bm25_floor)


def server_adaptive(d: Ranking, b: Ranking, bound: float, depth: int = 500, prior: float = 0.5) -> Ranking:
    """The server's own fusion (retriever.search.fusion.adaptive) on the scales the hybrid ranker gives it."""
    from retriever.search.fusion import adaptive

    return adaptive([d[:depth], [(k, s / bound) for k, s in b[:depth]] if bound > 0 else b[:depth]],
                    [prior, 1 - prior], limit=100)


Candidate = Callable[[Ranking, Ranking, dict[str, Any]], Ranking]


def candidates() -> dict[str, Candidate]:
    out: dict[str, Candidate] = {
        "dense": lambda d, b, x: d[:100],
        "bm25": lambda d, b, x: b[:100],
        "rrf k60 w0.5 depth 1000 (the default before)": lambda d, b, x: rrf(d, b),
        "**adaptive, vector_weight auto, depth 500 (the default now)**": lambda d, b, x: server_adaptive(
            d, b, x["bound"], prior=x["auto"]),
        "adaptive, vector_weight 0.5, depth 500": lambda d, b, x: server_adaptive(d, b, x["bound"]),
    }
    for prior in (0.1, 0.2, 0.3, 0.4, 0.6):
        out[f"adaptive prior {prior:g}"] = lambda d, b, x, prior=prior: server_adaptive(d, b, x["bound"], prior=prior)
    for w in (0.6, 0.7):
        out[f"rrf k60 w{w}"] = lambda d, b, x, w=w: rrf(d, b, w)
    for w in (0.5, 0.6, 0.7):
        out[f"convex minmax w{w}"] = lambda d, b, x, w=w: convex(d, b, w)
        out[f"convex zscore w{w}"] = lambda d, b, x, w=w: zscore(d, b, w)
        out[f"tm2c2 w{w}"] = lambda d, b, x, w=w: tm2c2(d, b, w)
        out[f"bounded w{w}"] = lambda d, b, x, w=w: bounded(d, b, x["bound"], w)
    for w in (0.4, 0.45, 0.55):
        out[f"bounded w{w}"] = lambda d, b, x, w=w: bounded(d, b, x["bound"], w)
    for w in (0.4, 0.5, 0.6):
        out[f"complete w{w}"] = lambda d, b, x, w=w: complete(d, b, x, w)
    out["complete w0.5 depth 1000"] = lambda d, b, x: complete(d, b, x, 0.5, 1000)
    for n in (5, 10, 20):
        out[f"peaked n{n}"] = lambda d, b, x, n=n: peaked(d, b, x["bound"], n)
    for n in (50, 100):
        out[f"peaked n{n}"] = lambda d, b, x, n=n: peaked(d, b, x["bound"], n)
    for depth in (200, 1000):
        out[f"peaked n20 depth {depth}"] = lambda d, b, x, depth=depth: peaked(d, b, x["bound"], 20, depth=depth)
    out["peaked n20 bm25 floor"] = lambda d, b, x: peaked(d, b, x["bound"], 20, bm25_floor=True)
    for lo in (0.1, 0.05):
        out[f"peaked n20 floor {lo:g}-{1 - lo:g}"] = lambda d, b, x, lo=lo: peaked(
            d, b, x["bound"], 20, lo, 1 - lo, bm25_floor=True)
    for power in (2.0, 3.0):
        out[f"peaked n20 floor power {power:g}"] = lambda d, b, x, power=power: peaked(
            d, b, x["bound"], 20, bm25_floor=True, power=power)
        out[f"peaked n20 floor power {power:g} 0.1-0.9"] = lambda d, b, x, power=power: peaked(
            d, b, x["bound"], 20, 0.1, 0.9, bm25_floor=True, power=power)
    out["peaked n10 0.1-0.9"] = lambda d, b, x: peaked(d, b, x["bound"], 10, 0.1, 0.9)
    out["peaked n10 0.3-0.7"] = lambda d, b, x: peaked(d, b, x["bound"], 10, 0.3, 0.7)
    for depth in (100, 1000):
        out[f"bounded w0.5 depth {depth}"] = lambda d, b, x, depth=depth: bounded(d, b, x["bound"], 0.5, depth)
    return out


def study(sets: list[str], chosen: list[str] | None = None) -> list[str]:
    from retriever.search.evaluation import evaluate

    table: dict[str, dict[str, dict[str, float]]] = {}
    cands = candidates()
    if chosen:
        cands = {k: v for k, v in cands.items() if k in chosen or k in ("dense", "bm25")}
    for name in sets:
        r = runs(name)
        auto = auto_prior(name)["vector_weight"]
        vectors = np.load(r["embedding"], mmap_mode="r")
        row_of = {k: i for i, k in enumerate(r["doc_ids"])}
        for cname, fn in cands.items():
            run = {q: fn(d, b, {"bound": bound, "qvec": qv, "vectors": vectors, "row_of": row_of, "auto": auto})
                   for q, d, b, bound, qv in zip(r["qids"], r["dense"], r["bm25"], r["bounds"], r["qvecs"])}
            table.setdefault(cname, {})[name] = evaluate(run, {q: r["qrels"][q] for q in r["qids"]})
    lines = ["| candidate | " + " | ".join(f"{s} nDCG@10 / R@100 / MRR@10" for s in sets) + " | worst gap to the better part |",
             "|---|" + "---|" * len(sets) + "---|"]
    for cname, by_set in table.items():
        gaps = []
        for s in sets:
            best_part = max(table["dense"][s]["ndcg@10"], table["bm25"][s]["ndcg@10"])
            gaps.append(by_set[s]["ndcg@10"] - best_part)
        cells = [f"{by_set[s]['ndcg@10']:.4f} / {by_set[s]['recall@100']:.4f} / {by_set[s]['mrr@10']:.4f}" for s in sets]
        lines.append(f"| {cname} | " + " | ".join(cells) + f" | {min(gaps):+.4f} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", default=["scifact-train", "scifact-titles", "synth"])
    p.add_argument("--only", nargs="*", help="candidates to evaluate (default: all)")
    p.add_argument("--section", default="fusion-study")
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    lines = study(args.sets, args.only)
    print("\n".join(lines), file=sys.stderr)
    write_section(args.section, "\n".join(lines) + "\n", out=ROOT / "bench" / "QUALITY.md")


if __name__ == "__main__":
    main()
