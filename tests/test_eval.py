"""Metrics (hand-computed cases) and the CLI: index, search, eval with a TREC run file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import cli_json, run_cli
from retriever.cli import parse_sets
from retriever.errors import RetrieverError
from retriever.evaluation import evaluate, load_qrels, mrr_at, ndcg_at, recall_at, write_trec_run


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
    assert proc.returncode == 2 and "call retriever_embed then retriever_index" in proc.stderr
