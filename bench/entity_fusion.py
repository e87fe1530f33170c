"""Fusion that holds on entity-like queries, and SPLADE-tiny in the fusion (issue 32).

Development sets (BEIR form; dense = the packaged all-MiniLM-L6-v2 through the engine, exact FAISS;
BM25 = bm25s, the server's defaults; sparse = SPLADE-tiny from scripts/splade_tiny.sh):

- `scifact-train`: BEIR SciFact's 809 train claims over its 5,183 abstracts (data/scifact).
- `scifact-names`: shaped like the failing entity set (short name-like queries over descriptions
  where the exact words of the name are not all there): 1,000 SciFact titles of at most 10 words
  (seed 32) as queries, each relevant to its own abstract; every document is its abstract with the
  exact word forms of its own title removed (case-insensitive; other inflections stay), so BM25
  matches only through inflections and the other words while the meaning stays for dense.
- `synth`: bench/synth.py's 5,000 documents of invented words (seed 3), 1,000 queries of 3-6 words
  of one document: dense near random, BM25 strong (the inverse case).
- `scifact-test`: the 300 test claims, measured once at the end (`--test`).

Each set's three runs (500 deep: candidate_depth) and per-query signals are cached under
bench/out/issue32/; candidates are fused from them with the server's own fusion functions
(search/fusion.py), and the default is measured again end to end through Retriever.hybrid_search.

    nice -n 10 .venv/bin/python bench/entity_fusion.py --prepare scifact-train scifact-names synth
    nice -n 10 .venv/bin/python bench/entity_fusion.py            # the study -> bench/QUALITY.md
    nice -n 10 .venv/bin/python bench/entity_fusion.py --test     # scifact-test, once
"""

from __future__ import annotations

import argparse
import contextvars
import json
import pickle
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from fusion_study import _synth  # the same synthetic set as the fusion study's
from report import judged, write_section

ROOT = Path(__file__).resolve().parents[1]

SCIFACT = ROOT / "data" / "scifact"
OUT = ROOT / "bench" / "out" / "issue32"
SPLADE = ROOT / ".cache" / "splade-tiny"
DEPTH = 500
# sets run without SPLADE-tiny (its encoding of 5,000 documents takes tens of minutes on the 2 shared
# cores here): their sparse candidates are left out of the table
NO_SPARSE = {"synth"}
WORD = re.compile(r"\w+", re.UNICODE)


# ---- sets -----------------------------------------------------------------------------------

def _names(folder: Path) -> None:
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    short = [i for i, d in enumerate(docs) if 0 < len(WORD.findall(d["title"])) <= 10]
    rng = np.random.default_rng(32)
    picked = sorted(rng.choice(short, 1000, replace=False).tolist())
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:
            gone = {w.lower() for w in WORD.findall(d["title"])}
            text = WORD.sub(lambda m, gone=gone: "" if m.group(0).lower() in gone else m.group(0), d["text"])
            f.write(json.dumps({"id": d["_id"], "contents": " ".join(text.split())}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for i in picked:
            f.write(json.dumps({"_id": f"n{i}", "text": docs[i]["title"]}) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                      "".join(f"n{i}\t{docs[i]['_id']}\t1\n" for i in picked))


def materialise(name: str) -> tuple[Path, Path, Path]:
    """(corpus, queries, qrels) of a set, written under bench/out/issue32/<name>/ when made here."""
    if name in ("scifact-train", "scifact-test"):
        return SCIFACT / "corpus.jsonl", SCIFACT / "queries.jsonl", SCIFACT / "qrels" / f"{name[8:]}.tsv"
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "qrels.tsv").exists():
        {"scifact-names": _names, "synth": _synth}[name](folder)
    return folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.tsv"


def engine_for(name: str, with_sparse: bool = True, **more: Any) -> Any:
    """The set's engine with dense, BM25 and (`with_sparse`) sparse indexes (built once, under
    bench/out/issue32/)."""
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    corpus, _, _ = materialise(name)
    index = OUT / ("scifact" if name.startswith("scifact-t") else name) / "index"
    overrides = {"corpus_path": str(corpus), "embedding_path": str(index / "embedding.npy"),
                 "docs_path": str(index / "docs"),
                 "index_backend_configs": {"faiss": {"index_path": str(index / "faiss")}},
                 "backend_configs": {"bm25": {"save_path": str(index / "bm25")}},
                 "sparse": {"model_name_or_path": str(SPLADE), "save_path": str(index / "sparse")}, **more}
    engine = Retriever(load_config(ROOT / "parameter.yaml", overrides), ROOT)
    engine.init()
    timings = {}
    if engine.dense is None:
        t = time.perf_counter()
        engine.embed(progress=False)
        engine.index()
        timings["dense_build_s"] = time.perf_counter() - t
    if engine.bm25 is None:
        engine.bm25_index(progress=False)
    if with_sparse and name not in NO_SPARSE and not (index / "sparse" / "manifest.json").exists():
        t = time.perf_counter()
        engine.sparse_index()
        timings["sparse_build_s"] = time.perf_counter() - t
    if timings:
        (index / "build_timings.json").write_text(json.dumps(timings))
    return engine


def runs(name: str) -> dict[str, Any]:
    """The three 500-deep runs, each kind's search time, and per-query signals; cached."""
    cache = OUT / f"{name}.runs.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    from retriever.search.calibration import measure
    from retriever.search.rankers import BM25, Dense

    _, queries_path, qrels_path = materialise(name)
    engine = engine_for(name)
    qids, qrels, qtexts = judged(queries_path, qrels_path)
    out: dict[str, Any] = {"qids": qids, "qrels": qrels, "texts": qtexts, "seconds": {}}
    kinds = [("dense", engine.search), ("bm25", engine.bm25_search), ("sparse", engine.sparse_search)]
    out["sparse"] = [[] for _ in qids]
    for kind, fn in kinds[: 2 if name in NO_SPARSE else 3]:
        fn(qtexts[:5], top_k=DEPTH)  # warm: the model loaded, the index read
        t = time.perf_counter()
        found = fn(qtexts, top_k=DEPTH)
        out["seconds"][kind] = (time.perf_counter() - t) / len(qtexts)
        out[kind] = [[(h.id, float(h.score)) for h in r] for r in found]
    s = engine.session
    out["bounds"] = s.bm25.bounds(qtexts)
    tokens = s.bm25._tokenized(qtexts)
    n = s.bm25.documents
    out["known"] = [sum(s.bm25.df(t) > 0 for t in ts) / max(len(ts), 1) for ts in tokens]
    out["terms"] = [len(ts) for ts in tokens]
    out["idf"] = [float(np.mean([np.log(1 + (n - s.bm25.df(t) + 0.5) / (s.bm25.df(t) + 0.5)) for t in ts]))
                  if ts else 0.0 for ts in tokens]
    out["auto"] = measure(s, Dense().rows, BM25().rows)
    cache.write_bytes(pickle.dumps(out))
    return out


def prepare(sets: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in sets:
        t = time.perf_counter()
        r = runs(name)
        print(f"{name}: {len(r['qids'])} queries, auto {r['auto']}, {time.perf_counter() - t:.0f} s",
              file=sys.stderr, flush=True)



def query_self(name: str, r: dict[str, Any]) -> list[float]:
    """Each query's sparse vector . itself (the most a document could share with it, if it held
    every term at the query's weight): a per-query scale for the sparse list; cached."""
    cache = OUT / f"{name}.qself.json"
    if not cache.exists():
        from retriever.search.learned_sparse import SparseModel

        q = SparseModel(str(SPLADE)).queries(r["texts"])
        cache.write_text(json.dumps(np.asarray(q.multiply(q).sum(axis=1)).ravel().tolist()))
    return json.loads(cache.read_text())


# ---- candidates -------------------------------------------------------------------------------

Ranking = list[tuple[str, float]]


def adaptive(lists: list[Ranking], priors: list[float], bounds: tuple[float, float] | None = None) -> Ranking:
    """The server's adaptive fusion (search/fusion.py), optionally with other share bounds."""
    from retriever.search import fusion

    if bounds is None:
        return fusion.adaptive(lists, priors, limit=100)
    saved = fusion.SHARE_BOUND
    fusion.SHARE_BOUND = bounds
    try:
        return fusion.adaptive(lists, priors, limit=100)
    finally:
        fusion.SHARE_BOUND = saved


def scaled(x: Ranking, by: float) -> Ranking:
    return [(k, s / by) for k, s in x] if by > 0 else x


def overlap(a: Ranking, b: Ranking, n: int = 10) -> float:
    return len({k for k, _ in a[:n]} & {k for k, _ in b[:n]}) / n


def coverage(b: Ranking, bound: float) -> float:
    """How much of the query's BM25 bound its best document reaches (0 where BM25 finds nothing)."""
    return min(1.0, b[0][1] / bound) if b and bound > 0 else 0.0


def signal_prior(x: dict[str, Any], p: float, power: float, floor: float) -> float:
    """The dense prior moved by BM25's coverage of the query: BM25's prior times coverage^power
    (at least `floor` of it), renormalised."""
    c = coverage(x["b"], x["bound"])
    bm = (1 - p) * max(floor, c ** power)
    return p / (p + bm)


def as_rows(x: Ranking, number: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A ranking as the server's rows (ids numbered) and scores."""
    return (np.array([number.setdefault(k, len(number)) for k, _ in x], dtype=np.int64),
            np.array([v for _, v in x], dtype=np.float64))


def cross_prior(x: dict[str, Any]) -> float:
    """The server's cross-check (search/signals.py) on a query's two lists."""
    from retriever.search.signals import checked_prior

    d, b = x["d"], x["b"]
    if not d or not b:
        return float(x["auto"])
    number: dict[str, int] = {}
    return checked_prior(x["auto"], as_rows(d, number), as_rows(b, number), x["bound"])


def cross_gap(d: Ranking, b: Ranking) -> float:
    """The server's cross gap (search/signals.py) of a query's two lists."""
    from retriever.search.signals import cross_gap as gap

    number: dict[str, int] = {}
    return gap(as_rows(d, number), as_rows(b, number))


def gated(x: dict[str, Any], priors: list[float]) -> list[float]:
    """The server's query gate (search/signals.py) over this set's queries in order: its verdict
    for this query from the ones before it, then this query's gap recorded."""
    d, b = x["d"], x["b"]
    number: dict[str, int] = {}
    leaned = x["gate"].weigh(priors, as_rows(d, number), as_rows(b, number), x["bound"])
    return leaned if leaned is not None else priors


def candidates() -> dict[str, Any]:
    out: dict[str, Any] = {
        "dense": lambda x: x["d"][:100],
        "bm25": lambda x: x["b"][:100],
        "sparse (SPLADE-tiny)": lambda x: x["sp"][:100],
        "rrf k60 (dense + bm25)": lambda x: __import__("retriever.search.fusion", fromlist=["fuse"]).fuse(
            "rrf", [x["d"], x["b"]], [0.5, 0.5], 60, limit=100),
        "adaptive, vector_weight auto (the default before the query gate)": lambda x: adaptive(
            [x["d"], scaled(x["b"], x["bound"])], [x["auto"], 1 - x["auto"]]),
        "**adaptive auto + query gate (hybrid.query_gate, the default; search/signals.py)**": lambda x: adaptive(
            [x["d"], scaled(x["b"], x["bound"])], gated(x, [x["auto"], 1 - x["auto"]])),
        "adaptive, vector_weight 0.5": lambda x: adaptive([x["d"], scaled(x["b"], x["bound"])], [0.5, 0.5]),
    }
    for lo, hi in ((0.2, 1.8), (0.1, 1.9)):
        out[f"adaptive auto, shares {lo:g}..{hi:g} x prior"] = lambda x, lo=lo, hi=hi: adaptive(
            [x["d"], scaled(x["b"], x["bound"])], [x["auto"], 1 - x["auto"]], (lo, hi))
    for power in (1.0, 2.0):
        for floor in (0.0, 0.25):
            out[f"adaptive auto, BM25 prior x coverage^{power:g} (floor {floor:g})"] = (
                lambda x, power=power, floor=floor: adaptive(
                    [x["d"], scaled(x["b"], x["bound"])],
                    [q := signal_prior(x, x["auto"], power, floor), 1 - q]))
    out["adaptive auto, BM25 prior x coverage, shares 0.2..1.8"] = lambda x: adaptive(
        [x["d"], scaled(x["b"], x["bound"])], [q := signal_prior(x, x["auto"], 1.0, 0.0), 1 - q], (0.2, 1.8))
    out["adaptive auto + cross-check (hybrid.cross_check: true; search/signals.py)"] = lambda x: adaptive(
        [x["d"], scaled(x["b"], x["bound"])], [q := cross_prior(x), 1 - q])
    out["adaptive auto + cross-check where the set's median cross gap >= 0.05 (needs the query population)"] = (
        lambda x: adaptive([x["d"], scaled(x["b"], x["bound"])],
                           [q := cross_prior(x) if x["median_gap"] >= 0.05 else x["auto"], 1 - q]))
    out["adaptive auto, agreement: top-10 overlap < 0.2 -> dense prior 0.7"] = lambda x: adaptive(
        [x["d"], scaled(x["b"], x["bound"])], [q := (0.7 if overlap(x["d"], x["b"]) < 0.2 and x["auto"] >= 0.5
                                                    else x["auto"]), 1 - q])
    # SPLADE-tiny in the fusion
    for label, key in (("best", "sp_best"), ("q.q", "qself")):
        out[f"adaptive 3-way dense + bm25 + sparse/{label}"] = lambda x, key=key: adaptive(
            [x["d"], scaled(x["b"], x["bound"]), scaled(x["sp"], x[key])],
            [x["auto"], (1 - x["auto"]) / 2, (1 - x["auto"]) / 2])
        out[f"adaptive dense + sparse/{label} (instead of bm25)"] = lambda x, key=key: adaptive(
            [x["d"], scaled(x["sp"], x[key])], [x["auto"], 1 - x["auto"]])
    return out


def study(sets: list[str], chosen: list[str] | None = None) -> tuple[list[str], dict[str, Any]]:
    from retriever.search.evaluation import evaluate
    from retriever.search.signals import QueryGate

    table: dict[str, dict[str, dict[str, float]]] = {}
    cands = candidates()
    if chosen:
        cands = {k: v for k, v in cands.items() if k in chosen or k in ("dense", "bm25")}
    info: dict[str, Any] = {}
    for name in sets:
        r = runs(name)
        qself = [1.0] * len(r["qids"]) if name in NO_SPARSE else query_self(name, r)
        auto = r["auto"]["vector_weight"]
        median_gap = float(np.median([cross_gap(d, b) for d, b in zip(r["dense"], r["bm25"])]))
        info[name] = {"auto": r["auto"], "seconds": r["seconds"], "queries": len(r["qids"]),
                      "coverage": float(np.median([coverage(b, bd) for b, bd in zip(r["bm25"], r["bounds"])])),
                      "overlap": float(np.mean([overlap(d, b) for d, b in zip(r["dense"], r["bm25"])])),
                      "terms": float(np.mean(r["terms"])), "known": float(np.mean(r["known"])),
                      "median_cross_gap": median_gap}
        for cname, fn in cands.items():
            if name in NO_SPARSE and "sparse" in cname:
                continue
            run = {}
            gate = QueryGate()  # each candidate starts with the set's first query
            for i, q in enumerate(r["qids"]):
                sp = r["sparse"][i]
                x = {"d": r["dense"][i], "b": r["bm25"][i], "sp": sp, "bound": r["bounds"][i], "auto": auto,
                     "sp_best": sp[0][1] if sp else 1.0, "qself": qself[i], "median_gap": median_gap,
                     "gate": gate}
                run[q] = fn(x)
            table.setdefault(cname, {})[name] = evaluate(run, {q: r["qrels"][q] for q in r["qids"]})
    lines = ["| candidate | " + " | ".join(f"{s} nDCG@10 / R@100" for s in sets) + " | worst gap to the better of dense and BM25 |",
             "|---|" + "---|" * len(sets) + "---|"]
    for cname, by_set in table.items():
        gaps = [by_set[s]["ndcg@10"] - max(table["dense"][s]["ndcg@10"], table["bm25"][s]["ndcg@10"])
                for s in sets if s in by_set]
        cells = [f"{by_set[s]['ndcg@10']:.4f} / {by_set[s]['recall@100']:.4f}" if s in by_set else "n/a"
                 for s in sets]
        lines.append(f"| {cname} | " + " | ".join(cells) + f" | {min(gaps):+.4f} |")
    return lines, {"table": table, "info": info}


def end_to_end(name: str, variants: tuple[str, ...] = ("off", "fused", "instead_of_bm25")) -> list[str]:
    """The server's hybrid through Retriever.hybrid_search (top 100, one call of every query, a
    fresh process's query gate), as shipped and with SPLADE-tiny in the fusion: nDCG@10, R@100
    and the time per query."""
    from retriever.search.evaluation import evaluate
    from retriever.session import forget_learned

    _, queries_path, qrels_path = materialise(name)
    qids, qrels, qtexts = judged(queries_path, qrels_path)
    lines = ["| hybrid through Retriever.hybrid_search | nDCG@10 | R@100 | ms per query (one call of all queries) |",
             "|---|---|---|---|"]
    for label, where in (("default (dense + BM25, adaptive, vector_weight auto, query gate)", "off"),
                         ("+ SPLADE-tiny (sparse.hybrid: fused)", "fused"),
                         ("SPLADE-tiny instead of BM25 (sparse.hybrid: instead_of_bm25)", "instead_of_bm25")):
        if where not in variants:
            continue
        engine = engine_for(name, where != "off", sparse={"model_name_or_path": str(SPLADE), "hybrid": where,
                                          "save_path": str(OUT / "scifact" / "index" / "sparse")})
        engine.hybrid_search(qtexts[:5], top_k=100)  # warm
        callers = [("", label)]
        if where == "off":  # the gate is kept per caller (compute.CALLER: a token's digest over HTTP)
            callers.append(("a-token-digest", label + ", in process as one token's caller (compute.CALLER set: its own query gate)"))
        for caller, row in callers:
            forget_learned()  # the query gate starts empty, as in a fresh server
            t = time.perf_counter()
            found = contextvars.copy_context().run(_as_caller, caller, engine, qtexts)
            ms = (time.perf_counter() - t) * 1000 / len(qtexts)
            m = evaluate({q: [(h.id, h.score) for h in hits] for q, hits in zip(qids, found)},
                         {q: qrels[q] for q in qids})
            lines.append(f"| {row} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {ms:.1f} |")
    return lines


def _as_caller(caller: str, engine: Any, queries: list[str]) -> Any:
    from retriever.compute import CALLER

    CALLER.set(caller)
    return engine.hybrid_search(queries, top_k=100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prepare", action="store_true", help="build the sets' indexes and cache their runs")
    p.add_argument("--test", action="store_true", help="scifact-test, once, for the candidates --only names")
    p.add_argument("--only", nargs="*", help="candidates to evaluate (default: all)")
    p.add_argument("--end-to-end", action="store_true",
                   help="the default hybrid through Retriever.hybrid_search on the sets (not scifact-test)")
    p.add_argument("sets", nargs="*", default=["scifact-train", "scifact-names", "synth"])
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.prepare:
        prepare(args.sets)
        return
    if args.end_to_end:
        lines = [f"`{name}`:\n\n" + "\n".join(end_to_end(name, ("off",))) for name in args.sets]
        print("\n\n".join(lines), file=sys.stderr)
        write_section("issue32-end-to-end", "\n\n".join(lines) + "\n", out=ROOT / "bench" / "QUALITY.md")
        return
    sets = ["scifact-test"] if args.test else args.sets
    lines, data = study(sets, args.only)
    if args.test:
        lines += ["", *end_to_end("scifact-test")]
    (OUT / ("test.json" if args.test else "study.json")).write_text(json.dumps(data, indent=1))
    print("\n".join(lines), file=sys.stderr)
    write_section("issue32-test" if args.test else "issue32-study", "\n".join(lines) + "\n",
                  out=ROOT / "bench" / "QUALITY.md")


if __name__ == "__main__":
    main()
