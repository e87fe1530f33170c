"""Adds at scale: 1,000 documents added to an index of N (bench/scale.py's project, built first).

Each step runs in a fresh process (the engine as `retriever deploy` holds it), its time and peak
RSS measured, the change log restored after, so the runs compare on the same state:

- `delta`: add 1,000 synthetic documents (bench/synth.py, another seed) with the default
  `rebuild_fraction`: FAISS appends their vectors, BM25 takes them as a delta; BM25 query latency
  (p50 over 100 queries) before and after; each of 50 added documents found by its own text.
- `restart`: a new process opening the collection with those 1,000 in the change log (the delta
  is tokenized again; nothing else is re-read).
- `rebuild`: the same add with `rebuild_fraction: 0`, the behaviour before the delta: BM25 rebuilt
  over every live document.

    .venv/bin/python bench/scale.py 1000000        # once: corpus and indexes
    .venv/bin/python bench/add_scale.py 1000000

Writes the "add-scale" section of bench/RESULTS.md and prints it to stderr.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from report import write_section

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "bench" / "out" / "scale"


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def p50_ms(fn: Any, queries: list[str]) -> float:
    times = []
    for q in queries:
        t = time.perf_counter()
        fn([q], 10)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def worker(config: Path, step: str, n_add: int) -> dict[str, Any]:
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever
    from synth import documents

    cfg = load_config(config)
    if step == "rebuild":
        cfg = cfg.with_overrides({"backend_configs": {"bm25": {"rebuild_fraction": 0}}}, config.parent)
    queries = [json.loads(line)["text"] for line in (config.parent / "queries.jsonl").read_text().splitlines()][:100]
    t = time.perf_counter()
    engine = Retriever(cfg, config.parent)
    status = engine.init()
    out: dict[str, Any] = {"init_s": time.perf_counter() - t, "rss_after_init_gb": peak_gb(),
                           "bm25_documents": status["bm25_index"],
                           "delta": len(engine.session.bm25.delta or ()) if engine.session.bm25 else None}
    if step == "restart":
        out["bm25_p50_ms"] = p50_ms(engine.bm25_search, queries)
        return out
    out["bm25_p50_before_ms"] = p50_ms(engine.bm25_search, queries)
    docs = [{**d, "id": f"added{i}"} for i, d in enumerate(documents(n_add, more=1))]
    t = time.perf_counter()
    report = engine.add(docs)
    out["add_s"] = time.perf_counter() - t
    out["peak_gb"] = peak_gb()
    out["report"] = report
    out["delta_after"] = len(engine.session.bm25.delta or ())
    out["bm25_p50_after_ms"] = p50_ms(engine.bm25_search, queries)
    out["found_by_own_text"] = sum(engine.bm25_search([d["contents"]], 1)[0][0].id == d["id"] for d in docs[:50])
    return out


def run_step(config: Path, step: str, n_add: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", step, "--n-add", str(n_add), "0", str(config)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout)
    result["wall_s"] = time.perf_counter() - t
    print(step, json.dumps(result), file=sys.stderr)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("size", type=int)
    p.add_argument("--n-add", type=int, default=1000)
    p.add_argument("--worker")
    p.add_argument("config", nargs="?")
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(Path(args.config), args.worker, args.n_add)))
        return
    folder = OUT / str(args.size)
    config, out = folder / "parameter.yaml", folder / "out"
    manifest = json.loads((out / "bm25" / "manifest.json").read_text())
    if "avgdl" not in manifest or "collection_rows" not in manifest:  # built before the delta existed
        subprocess.run([str(Path(sys.executable).parent / "retriever"), "--log-level", "warning", "index", "--config",
                        str(config), "--mode", "bm25", "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    kept = ("docs", "bm25")  # the change log and the BM25 index it matches, restored after each step
    for name in kept:
        shutil.rmtree(folder / f"{name}.saved", ignore_errors=True)
        if (out / name).exists():
            shutil.copytree(out / name, folder / f"{name}.saved")

    def restore() -> None:
        for name in kept:
            shutil.rmtree(out / name, ignore_errors=True)
            if (folder / f"{name}.saved").exists():
                shutil.copytree(folder / f"{name}.saved", out / name)

    try:
        delta = run_step(config, "delta", args.n_add)
        restart = run_step(config, "restart", args.n_add)
        restore()
        rebuild = run_step(config, "rebuild", args.n_add)
    finally:
        restore()
    n = args.size
    body = [
        f"Produced by `.venv/bin/python bench/add_scale.py {n}` (after `bench/scale.py {n}`): {args.n_add:,} "
        f"synthetic documents (bench/synth.py's vocabulary, new draws) added to a collection of "
        f"{delta['bm25_documents']:,} (static model, FAISS Flat, BM25), each step a fresh process.",
        "",
        "| step | seconds | peak RSS of the process (GB) | BM25 one query p50 ms |",
        "|---|---|---|---|",
        f"| open the collection (init) | {delta['init_s']:.1f} | {delta['rss_after_init_gb']:.2f} | "
        f"{delta['bm25_p50_before_ms']:.1f} |",
        f"| add {args.n_add:,}, BM25 delta (default) | {delta['add_s']:.2f} | {delta['peak_gb']:.2f} | "
        f"{delta['bm25_p50_after_ms']:.1f} |",
        f"| open again with the {args.n_add:,} in the log | {restart['init_s']:.1f} | {restart['rss_after_init_gb']:.2f} | "
        f"{restart['bm25_p50_ms']:.1f} |",
        f"| add {args.n_add:,}, BM25 rebuilt (`rebuild_fraction: 0`, the behaviour before) | {rebuild['add_s']:.2f} | "
        f"{rebuild['peak_gb']:.2f} | {rebuild['bm25_p50_after_ms']:.1f} |",
        "",
        f"Added documents found first by their own text (BM25): {delta['found_by_own_text']}/50 with the delta, "
        f"{rebuild['found_by_own_text']}/50 rebuilt. BM25 documents after the add: {delta['delta_after']:,} in the "
        f"delta; at the restart {restart['delta']:,} in the delta, {restart['bm25_documents']:,} live.",
        "",
    ]
    write_section(f"add-scale-{n}", f"## Adds at scale: {n:,}\n\n" + "\n".join(body))
    print("\n".join(body), file=sys.stderr)


if __name__ == "__main__":
    main()
