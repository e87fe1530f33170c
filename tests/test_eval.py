"""Metrics (hand-computed cases) and the CLI: index, search, eval with a TREC run file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import cli_json, run_cli
from retriever.cli import parse_sets
from retriever.errors import RetrieverError
from retriever.search.evaluation import evaluate, load_qrels, mrr_at, ndcg_at, recall_at, write_trec_run


def test_ndcg_matches_the_trec_eval_definition() -> None:
    rels = {"a": 1, "b": 2}
    # ranks: x, b, a -> DCG = 2/log2(3) + 1/log2(4); ideal = 2/log2(2) + 1/log2(3)
    want = (2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3))
    assert ndcg_at(["x", "b", "a"], rels, 10) == pytest.approx(want)
    assert ndcg_at(["b", "a"], rels, 10) == pytest.approx(1.0)
    assert ndcg_at(["x", "b", "a"], rels, 1) == 0.0


def test_recall_and_mrr() -> None:
    rels = {"a": 1, "b": 1, "c": 0}
    assert recall_at(["c", "a", "z"], rels, 100) == 0.5
    assert recall_at(["c", "a", "b"], rels, 2) == 0.5
    assert mrr_at(["c", "z", "b"], rels, 10) == pytest.approx(1 / 3)
    assert mrr_at(["c", "z", "b"], rels, 2) == 0.0


def test_evaluate_counts_missing_queries_as_zero(tmp_path: Path) -> None:
    qrels_file = tmp_path / "q.tsv"
    qrels_file.write_text("query-id\tcorpus-id\tscore\n1\ta\t1\n2\tb\t1\n")
    qrels = load_qrels(qrels_file)
    metrics = evaluate({"1": [("a", 3.0)]}, qrels)
    assert metrics == {"ndcg@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5, "queries": 2}
    run_file = tmp_path / "run.trec"
    write_trec_run({"1": [("a", 3.0), ("b", 1.5)]}, run_file, "t")
    assert run_file.read_text().splitlines() == ["1 Q0 a 1 3.000000 t", "1 Q0 b 2 1.500000 t"]


def test_set_overrides_parse_dotted_keys_and_yaml_values() -> None:
    assert parse_sets(["top_k=7", "backend_configs.bm25.k1=0.9", "gpu_ids=null"]) == {
        "top_k": 7, "backend_configs": {"bm25": {"k1": 0.9}}, "gpu_ids": None}
    with pytest.raises(RetrieverError, match="KEY=VALUE"):
        parse_sets(["top_k"])


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_cli_index_search_eval(tmp_path: Path, project: Path) -> None:
    report = cli_json("index", "--config", str(project))
    assert report["status"]["dense_index"] == 30 and report["status"]["bm25_index"] == 30
    again = cli_json("index", "--config", str(project))  # up to date: nothing rebuilt
    assert "embed" not in again and "bm25" not in again

    hits = cli_json("search", "black holes and light", "-k", "2", "--json", "--config", str(project))
    assert hits[0]["id"] == "doc07" and len(hits) == 2
    text = run_cli("search", "black holes", "--mode", "bm25", "--config", str(project))
    assert text.returncode == 0 and "1. [doc07]" in text.stdout

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "volcano on mars"}) + "\n"
                       + json.dumps({"_id": "q2", "text": "tides of the ocean"}) + "\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\tdoc09\t1\nq2\tdoc08\t1\n")
    run_file = tmp_path / "run.trec"
    metrics = cli_json("eval", "--config", str(project), "--queries", str(queries), "--qrels", str(qrels),
                       "--mode", "bm25", "--json", "--run-file", str(run_file))
    assert metrics["ndcg@10"] == 1.0 and metrics["queries"] == 2
    assert run_file.read_text().splitlines()[0].startswith("q1 Q0 doc09 1 ")


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_cli_add_delete_and_filtered_search(tmp_path: Path, built_project: Path) -> None:
    import shutil

    shutil.copytree(built_project.parent, tmp_path / "p")
    config = str(tmp_path / "p" / "parameter.yaml")
    new = tmp_path / "new.jsonl"
    new.write_text("\n".join(json.dumps(r) for r in [
        {"id": "n1", "contents": "Quokkas live on Rottnest Island.", "year": 2024},
        {"_id": "doc07", "title": "Quokka", "text": "A quokka smiles.", "year": 2025},
    ]) + "\n")
    assert cli_json("add", str(new), "--batch", "1", "--config", config) == {"added": 1, "replaced": 1,
                                                                             "documents": 31}
    recent = json.dumps({"field": "meta.year", "operator": ">=", "value": 2024})
    hits = cli_json("search", "quokka", "--json", "--mode", "hybrid", "--filters", recent, "--config", config)
    assert sorted(h["id"] for h in hits) == ["doc07", "n1"] and all(h["metadata"]["year"] >= 2024 for h in hits)
    assert cli_json("delete", "n1", "ghost", "--config", config) == {"deleted": 1, "not_found": ["ghost"],
                                                                    "documents": 30}
    proc = run_cli("search", "x", "--filters", "{bad", "--config", config)
    assert proc.returncode == 2 and "--filters is not valid JSON" in proc.stderr


@pytest.mark.slow  # seconds: a subprocess, a crash loop or a SciFact pass; the full suite runs it
def test_cli_errors_are_one_clear_line(project: Path) -> None:
    proc = run_cli("search", "x", "--config", str(project), "--set", "top_kk=3")
    assert proc.returncode == 2
    assert "unknown key 'top_kk'" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("search", "x", "--config", str(project))
    assert proc.returncode == 2 and "`retriever index`" in proc.stderr


# ---- cross-checks against standard implementations, and the significance test ---------------

QRELS_TEST = None


@pytest.fixture(scope="module")
def scifact_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real TREC run files: BM25 on SciFact test (300 queries, 100 deep) with two settings (their
    scores tie now and then, as BM25's do), the first with rank-derived scores (no ties) and with
    scores rounded to 1 decimal (ties everywhere, to check the order ties are read in)."""
    from retriever.search.evaluation import load_queries
    from retriever.testing.projects import SCIFACT, engine_for, write_project

    folder = tmp_path_factory.mktemp("runs")
    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    queries = load_queries(SCIFACT / "queries.jsonl")
    qids = list(qrels)
    files = {}
    for name, k1 in (("bm25", 1.5), ("bm25_k1_0.6", 0.6)):
        engine = engine_for(write_project(folder / name, SCIFACT / "corpus.jsonl", backend="bm25"),
                            {"backend_configs": {"bm25": {"k1": k1}}})
        engine.init()
        engine.bm25_index(progress=False)
        hits = engine.bm25_search([queries[q] for q in qids], top_k=100)
        run = {q: [(h.id, h.score) for h in hs] for q, hs in zip(qids, hits)}
        write_trec_run(run, folder / f"{name}.trec", name)
        files[name] = folder / f"{name}.trec"
        if name == "bm25":
            for variant, score in (("ties", lambda r, s: round(s, 1)), ("ranked", lambda r, s: 1000.0 - r)):
                changed = {q: [(d, score(r, s)) for r, (d, s) in enumerate(docs)] for q, docs in run.items()}
                write_trec_run(changed, folder / f"{variant}.trec", variant)
                files[variant] = folder / f"{variant}.trec"
    return files


def test_measures_equal_pytrec_eval_ir_measures_and_ranx(scifact_runs: dict[str, Path]) -> None:
    import ir_measures
    import pytrec_eval
    import ranx
    from retriever.search.evaluation import read_trec_run
    from retriever.testing.projects import SCIFACT

    qrels_file = SCIFACT / "qrels" / "test.tsv"
    qrels = load_qrels(qrels_file)
    for name, path in scifact_runs.items():
        ours = evaluate(read_trec_run(path), qrels)
        trec_run: dict[str, dict[str, float]] = {}
        for line in path.read_text().splitlines():
            q, _, d, _, s, _ = line.split()
            trec_run.setdefault(q, {})[d] = float(s)
        trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "recip_rank"})
        per_query = trec.evaluate(trec_run)
        measured = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.R @ 100, ir_measures.RR @ 10],
                                              ir_measures.read_trec_qrels(str(_trec_qrels(qrels_file))),
                                              ir_measures.read_trec_run(str(path)))
        ranx_scores = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(trec_run), ["ndcg@10", "recall@100", "mrr@10"])
        n = len(qrels)
        trec_means = {"ndcg@10": sum(v["ndcg_cut_10"] for v in per_query.values()) / n,
                      "recall@100": sum(v["recall_100"] for v in per_query.values()) / n}
        for measure, value in trec_means.items():
            assert ours[measure] == round(value, 4), (name, measure, "pytrec_eval")
        # trec_eval's recip_rank has no cutoff: ours without one, in the order we read the file
        uncut = sum(mrr_at([d for d, _ in read_trec_run(path).get(q, [])], rels, 10**6) for q, rels in qrels.items())
        assert round(uncut / n, 4) == round(sum(v["recip_rank"] for v in per_query.values()) / n, 4), name
        for measure, key in (("ndcg@10", ir_measures.nDCG @ 10), ("recall@100", ir_measures.R @ 100),
                             ("mrr@10", ir_measures.RR @ 10)):
            if measure == "mrr@10" and name == "ties":  # ir-measures' RR@10 provider breaks ties its own way
                continue
            assert ours[measure] == round(measured[key], 4), (name, measure, "ir-measures")
            if name == "ranked":  # ranx orders tied documents its own way; trec_eval's order is the standard
                assert ours[measure] == round(ranx_scores[measure], 4), (name, measure, "ranx")


def _trec_qrels(beir: Path) -> Path:
    out = beir.with_name(beir.stem + ".trec-qrels")
    if not out.exists():
        rows = beir.read_text().splitlines()[1:]
        out.write_text("".join(f"{q} 0 {d} {s}\n" for q, d, s in (r.split("\t") for r in rows if r)))
    return out


def test_the_significance_test_agrees_with_scipy_and_ranx(scifact_runs: dict[str, Path]) -> None:
    import numpy as np
    import ranx
    from ranx.statistical_tests import fisher_randomization_test
    from retriever.search.evaluation import compare, per_query, read_trec_run
    from retriever.testing.projects import SCIFACT
    from scipy.stats import ttest_rel

    qrels = load_qrels(SCIFACT / "qrels" / "test.tsv")
    a, b = read_trec_run(scifact_runs["bm25_k1_0.6"]), read_trec_run(scifact_runs["bm25"])
    result = compare(a, b, qrels, "ndcg@10", permutations=20_000, seed=1)
    x, y = per_query(a, qrels, "ndcg@10"), per_query(b, qrels, "ndcg@10")
    assert result["delta"] == round(float((y - x).mean()), 4) and result["queries"] == 300
    assert result["p_ttest"] == round(float(ttest_rel(y, x).pvalue), 4)
    ranx_p, _ = fisher_randomization_test(x, y, n_permutations=20_000, max_p=0.05, random_seed=3)
    assert abs(result["p_randomisation"] - ranx_p) < 0.02, (result, ranx_p)  # two Monte Carlo estimates
    same = compare(a, a, qrels)
    assert (same["delta"], same["p_randomisation"], same["p_ttest"]) == (0.0, 1.0, 1.0)
    assert isinstance(ranx, object) and np.isfinite(result["p_randomisation"])


def test_cli_eval_of_a_run_file_and_compare(scifact_runs: dict[str, Path]) -> None:
    from retriever.search.evaluation import read_trec_run
    from retriever.testing.projects import SCIFACT

    qrels = SCIFACT / "qrels" / "test.tsv"
    measured = cli_json("eval", "--run", str(scifact_runs["bm25"]), "--qrels", str(qrels), "--json")
    assert measured["ndcg@10"] == evaluate(read_trec_run(scifact_runs["bm25"]), load_qrels(qrels))["ndcg@10"]
    compared = cli_json("compare", str(scifact_runs["bm25_k1_0.6"]), str(scifact_runs["bm25"]), "--qrels", str(qrels),
                        "--json", "--permutations", "2000")
    assert compared["measure"] == "ndcg@10" and 0 < compared["p_randomisation"] <= 1
    bad = run_cli("eval", "--qrels", str(qrels))
    assert bad.returncode != 0 and "needs --queries (to search) or --run" in bad.stderr
