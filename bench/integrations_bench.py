"""SciFact through each framework's own pipeline object with our retriever (retriever.integrations):
nDCG@10 and Recall@100 of the 300 test queries against `retriever eval --mode hybrid` on the same
indexes. LlamaIndex: a RetrieverQueryEngine in its no-LLM mode (response_mode no_text, the hits as
source_nodes); Haystack: a Pipeline (our component -> DocumentJoiner) saved to YAML and loaded back;
LangChain: the chain `retriever | ids` run with `batch`. Each retriever is made with `from_yaml`
(the library in process), top_k 100, the defaults otherwise (mode hybrid, scores 0..1).
Writes section `integrations` of bench/RESULTS.md.

    .venv/bin/python bench/integrations_bench.py     # minutes the first time: SciFact is embedded once
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from report import ROOT, SCIFACT, write_section

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network calls from Haystack
OUT = ROOT / "bench" / "out" / "integrations"
BIN = Path(sys.executable).parent
K = 100


def project() -> Path:
    """A parameter.yaml for SciFact (the shipped defaults), its outputs under bench/out/integrations."""
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg.update(corpus_path=str(SCIFACT / "corpus.jsonl"), embedding_path=str(OUT / "embedding.npy"),
               docs_path=str(OUT / "docs"))
    cfg["index_backend_configs"]["faiss"]["index_path"] = str(OUT / "faiss")
    cfg["backend_configs"]["bm25"]["save_path"] = str(OUT / "bm25")
    path = OUT / "parameter.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def cli(*args: str) -> str:
    proc = subprocess.run([str(BIN / "retriever"), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"retriever {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def ranked_run_file(path: Path) -> dict[str, list[str]]:
    """A TREC run file's ids per query in the order written (rank order)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, *_ = line.split()
        out.setdefault(qid, []).append(doc)
    return out


def library(config: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    """The library's own hybrid search, one query per call as the frameworks ask (scores 0..1, the
    agent's): a query's hybrid ranking may depend on the queries searched before it (the YAML's
    hybrid.query_gate reads the recent ones), so the CLI's one call of 300 is not the reference for ids."""
    from retriever.engine.retriever import Retriever

    engine = Retriever.from_yaml(config)
    engine.init()
    return [[(h.id, h.score) for h in engine.hybrid_search([q], K, scale_score=True)[0]] for q in queries]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Equal ids in order and scores to 1e-6."""
    return [i for i, _ in a] == [i for i, _ in b] and all(abs(x - y) <= 1e-6 for (_, x), (_, y) in zip(a, b))


def llamaindex(config: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    from llama_index.core import Settings
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.response_synthesizers import ResponseMode, get_response_synthesizer
    from retriever.integrations.llamaindex import Retriever

    Settings.llm = None  # LlamaIndex's no-LLM mode: no_text synthesises nothing
    engine = RetrieverQueryEngine(retriever=Retriever.from_yaml(config, top_k=K),
                                  response_synthesizer=get_response_synthesizer(response_mode=ResponseMode.NO_TEXT))
    return [[(n.node.node_id, float(n.score or 0.0)) for n in engine.query(q).source_nodes] for q in queries]


def haystack(config: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    from haystack import Pipeline
    from haystack.components.joiners import DocumentJoiner
    from retriever.integrations.haystack import Retriever

    built = Pipeline()
    built.add_component("retriever", Retriever.from_yaml(config, top_k=K))
    built.add_component("joiner", DocumentJoiner())
    built.connect("retriever.documents", "joiner.documents")
    text = built.dumps()
    (OUT / "haystack_pipeline.yaml").write_text(text)
    pipeline = Pipeline.loads(text, allowed_modules=["retriever.integrations.haystack"])
    return [[(d.id, float(d.score or 0.0)) for d in pipeline.run({"retriever": {"query": q}})["joiner"]["documents"]]
            for q in queries]


def langchain(config: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    from langchain_core.runnables import RunnableLambda
    from retriever.integrations.langchain import Retriever

    chain = Retriever.from_yaml(config, top_k=K) | RunnableLambda(lambda docs: [(d.id, d.metadata["score"])
                                                                                 for d in docs])
    return chain.batch(queries, config={"max_concurrency": 1})  # type: ignore[no-any-return]


FRAMEWORKS: dict[str, tuple[str, Callable[[Path, list[str]], list[list[tuple[str, float]]]]]] = {
    "LlamaIndex": ("RetrieverQueryEngine, response_mode no_text", llamaindex),
    "Haystack": ("Pipeline (retriever -> DocumentJoiner), loaded from its YAML", haystack),
    "LangChain": ("chain `retriever \\| RunnableLambda`, batch", langchain),
}


def main() -> None:
    from importlib.metadata import version

    from retriever.search.evaluation import evaluate, load_qrels, load_queries

    config = project()
    t = time.perf_counter()
    cli("index", "--config", str(config))
    build = time.perf_counter() - t
    qrels_path, queries_path = SCIFACT / "qrels" / "test.tsv", SCIFACT / "queries.jsonl"
    run_file = OUT / "eval_hybrid.run"
    t = time.perf_counter()
    baseline = json.loads(cli("eval", "--config", str(config), "--mode", "hybrid", "--queries", str(queries_path),
                              "--qrels", str(qrels_path), "--json", "--run-file", str(run_file)))
    eval_seconds = time.perf_counter() - t
    eval_ids = ranked_run_file(run_file)
    qrels, texts = load_qrels(qrels_path), load_queries(queries_path)
    qids = list(qrels)
    queries = [texts[q] for q in qids]
    n = len(qids)
    rows = [f"| `retriever eval --mode hybrid` | the CLI, one call of {n} queries | {baseline['ndcg@10']:.4f} | "
            f"{baseline['recall@100']:.4f} | {n}/{n} | | {eval_seconds:.1f} (a process) |"]
    t = time.perf_counter()
    reference = library(config, queries)
    runs = {"library": ("`hybrid_search`, one query per call", reference, time.perf_counter() - t)}
    found: dict[str, float] = {}
    for name, (shape, run) in FRAMEWORKS.items():
        t = time.perf_counter()
        runs[name] = (shape, run(config, queries), time.perf_counter() - t)
    for name, (shape, lists, seconds) in runs.items():
        metrics = evaluate(dict(zip(qids, lists)), qrels)
        as_eval = sum([i for i, _ in row] == eval_ids.get(q, []) for q, row in zip(qids, lists))
        as_library = sum(same(a, b) for a, b in zip(lists, reference))
        found[name] = metrics["ndcg@10"]
        label = name if name == "library" else f"{name} {version(PACKAGES[name])}"
        rows.append(f"| {label} | {shape} | {metrics['ndcg@10']:.4f} | {metrics['recall@100']:.4f} | {as_eval}/{n} | "
                    f"{as_library}/{n} | {seconds:.1f} |")
        print(json.dumps({"path": name, **metrics, "as_eval": as_eval, "as_library": as_library,
                          "seconds": round(seconds, 1)}), file=sys.stderr)
    equal = all(round(v, 3) == round(baseline["ndcg@10"], 3) for name, v in found.items() if name in FRAMEWORKS)
    body = "\n".join([
        f"## Framework integrations on SciFact (`bench/integrations_bench.py`, {time.strftime('%Y-%m-%d')})",
        "",
        "Each framework's own pipeline object with our retriever (`retriever.integrations`, made with `from_yaml`, "
        f"top_k {K}, mode hybrid), over SciFact's {len(qids)} test queries (5,183 abstracts, the shipped "
        "parameter.yaml: MiniLM, FAISS flat, BM25, adaptive fusion), against `retriever eval --mode hybrid` on the "
        f"same indexes (`retriever index` before it: {build:.0f} s this run, which keeps indexes that are up to "
        f"date). \"As eval\": queries whose {K} ids come in the eval run's order; \"as library\": queries whose ids, "
        "order and scores (to 1e-6) equal the library's own `hybrid_search` searched one query per call, as the "
        "frameworks search. A query's hybrid ranking can depend on the queries searched before it in the process "
        "(the YAML's `hybrid.query_gate` reads the last 200), so a search one query at a time may order a deep hit "
        "differently from the CLI's one call. Seconds: one run each "
        "on this machine (2 cores shared with other work), model and index load included.",
        "",
        "| path | pipeline object | nDCG@10 | Recall@100 | as eval | as library | seconds |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"nDCG@10 equal to the CLI's to 3 decimals in every framework: **{'yes' if equal else 'NO'}**.",
    ])
    write_section("integrations", body)
    print(body)


PACKAGES = {"LlamaIndex": "llama-index-core", "Haystack": "haystack-ai", "LangChain": "langchain-core"}

if __name__ == "__main__":
    main()
