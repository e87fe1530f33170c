"""Built-in pipeline steps: load queries and documents (`data`), evaluate a run (`eval`).

    data.load_queries    $queries_path [$qrels_path: only the judged queries, in qrels order]
                         [$limit] -> q_ls, qid_ls
    data.load_documents  $documents_path -> documents     (JSONL records, for retriever_add)
    eval.evaluate        qid_ls, ret_ids, ret_scores, $qrels_path [$run_file] -> metrics

Queries are BEIR (`_id`, `text`) or UltraRAG benchmark lines (`id`, `question`). Metrics are
`retriever eval`'s (nDCG@10, Recall@100, MRR@10), on the same code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..search.evaluation import evaluate as evaluate_run
from ..search.evaluation import load_qrels, write_trec_run
from .grammar import ToolIO


def _path(base_dir: Path, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def load_queries(base_dir: Path, queries_path: str, qrels_path: str | None = None,
                 limit: int | None = None) -> dict[str, Any]:
    texts: dict[str, str] = {}
    for n, line in enumerate(_path(base_dir, queries_path).read_text(encoding="utf-8").splitlines()):
        if line.strip():
            q = json.loads(line)
            texts[str(q.get("_id", q.get("id", n)))] = q.get("text", q.get("question", ""))
    qids = list(texts)
    if qrels_path:
        judged = load_qrels(_path(base_dir, qrels_path))
        missing = [q for q in judged if q not in texts]
        if missing:
            raise InvalidInputError(f"data.load_queries: {len(missing)} judged queries are not in {queries_path} "
                                    f"(first: {missing[0]})")
        qids = list(judged)
    qids = qids[:limit] if limit else qids
    return {"q_ls": [texts[q] for q in qids], "qid_ls": qids}


def load_documents(base_dir: Path, documents_path: str) -> dict[str, Any]:
    lines = _path(base_dir, documents_path).read_text(encoding="utf-8").splitlines()
    return {"documents": [json.loads(line) for line in lines if line.strip()]}


def evaluate(base_dir: Path, qid_ls: list[str], ret_ids: list[list[str]], ret_scores: list[list[float]],
             qrels_path: str, run_file: str | None = None) -> dict[str, Any]:
    if not len(qid_ls) == len(ret_ids) == len(ret_scores):
        raise InvalidInputError(f"eval.evaluate: {len(qid_ls)} query ids for {len(ret_ids)} result lists")
    run = {q: list(zip(ids, scores)) for q, ids, scores in zip(qid_ls, ret_ids, ret_scores)}
    if run_file:
        write_trec_run(run, _path(base_dir, run_file), "retriever-pipeline")
    return {"metrics": evaluate_run(run, load_qrels(_path(base_dir, qrels_path)))}


Builtin = tuple[ToolIO, Callable[..., dict[str, Any]]]
BUILTINS: dict[str, dict[str, Builtin]] = {
    "data": {
        "load_queries": (ToolIO({"queries_path": "$queries_path", "qrels_path": "$qrels_path", "limit": "$limit"},
                                ["q_ls", "qid_ls"], {"qrels_path", "limit"}), load_queries),
        "load_documents": (ToolIO({"documents_path": "$documents_path"}, ["documents"]), load_documents),
    },
    "eval": {
        "evaluate": (ToolIO({"qid_ls": "qid_ls", "ret_ids": "ret_ids", "ret_scores": "ret_scores",
                             "qrels_path": "$qrels_path", "run_file": "$run_file"}, ["metrics"], {"run_file"}),
                     evaluate),
    },
}
