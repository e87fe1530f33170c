"""`retriever run`: each grammar element (mapping, loop, branch, parameters, an external MCP server
over stdio), the checks before the first step, a failing step named, and SciFact metrics equal
to `retriever eval`'s."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cli_json, run_cli
from retriever.errors import ConfigError, RetrieverError
from retriever.pipeline.runner import run_pipeline
from retriever.testing.projects import ROOT, SCIFACT, write_project

ROUTER = Path(__file__).parent / "data" / "router_server.py"


def pipeline(tmp_path: Path, servers: dict[str, Any], steps: list[Any]) -> Path:
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump({"servers": servers, "pipeline": steps}, sort_keys=False))
    return path


def run(path: Path, params: Path | None = None) -> dict[str, Any]:
    return asyncio.run(run_pipeline(path, params, path.parent / "out.json"))


@pytest.fixture
def servers(built_project: Path, tmp_path: Path) -> dict[str, Any]:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "a", "text": "what is BM25?"}\n{"_id": "b", "text": "how do vaccines work"}\n')
    return {"retriever": {"kind": "retriever", "config": str(built_project), "set": {"top_k": 2}},
            "data": {"kind": "data", "params": {"queries_path": str(queries)}},
            "router": {"command": [sys.executable, str(ROUTER)]}}


def test_mapping_outputs_and_inputs(tmp_path: Path, servers: dict[str, Any]) -> None:
    out = run(pipeline(tmp_path, servers, [
        "data.load_queries",
        {"data.load_queries": {"output": {"q_ls": "other_q"}}},
        "retriever.retriever_init",
        {"retriever.bm25_search": {"input": {"q_ls": "other_q"}, "output": {"ret_ids": "bm25_ids"}}},
        "retriever.retriever_search",
    ]))
    v = out["variables"]
    assert v["bm25_ids"][0][0] == "doc15" and len(v["bm25_ids"]) == 2
    assert v["ret_ids"][0][0] == "doc15" and [len(r) for r in v["ret_ids"]] == [2, 2]  # top_k from `set`
    assert v["other_q"] == v["q_ls"]
    saved = json.loads((tmp_path / "out.json").read_text())
    assert [s["name"] for s in saved["steps"]][-1] == "retriever.retriever_search"


def test_loop_branch_and_an_external_server(tmp_path: Path, servers: dict[str, Any]) -> None:
    out = run(pipeline(tmp_path, servers, [
        "data.load_queries",
        {"loop": {"times": 3, "steps": ["router.count"]}},
        {"branch": {"router": ["router.route"],
                    "branches": {"many": [{"router.count": {"output": {"counted": "many_count"}}}],
                                 "one": [{"router.count": {"output": {"counted": "one_count"}}}]}}},
    ]))
    v = out["variables"]
    assert v["counted"] == 3 and v["state"] == "many" and v["many_count"] == 4 and "one_count" not in v
    assert [s["name"] for s in out["steps"]].count("router.count") == 4


def test_branch_routes_each_item(tmp_path: Path, servers: dict[str, Any]) -> None:
    """UltraRAG's per-item routing: each query goes down its state's branch; the lists the branches
    make are put back in the queries' order."""
    out = run(pipeline(tmp_path, servers, [
        "data.load_queries",
        "retriever.retriever_init",
        {"branch": {"router": ["router.route_items"],
                    "branches": {"short": [{"retriever.bm25_search": {"output": {"ret_scores": "bm25_scores"}}}],
                                 "long": ["retriever.retriever_search"]}}},
    ]))
    v = out["variables"]
    assert v["q_ls"] == ["what is BM25?", "how do vaccines work"]  # unwrapped, in order
    assert v["ret_ids"][0] == ["doc15"]  # the short query: BM25 (one document shares a term)
    assert len(v["ret_ids"][1]) == 2 and v["ret_ids"][1][0] == "doc03"  # the long one: dense, top_k 2
    assert v["bm25_scores"][1] is None and v["bm25_scores"][0]  # made by one branch only
    assert [s["name"] for s in out["steps"]][-2:] == ["retriever.bm25_search", "retriever.retriever_search"]


def test_parameters_and_the_param_file(tmp_path: Path, servers: dict[str, Any]) -> None:
    path = pipeline(tmp_path, servers, ["data.load_queries", "retriever.retriever_init", "retriever.retriever_search"])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"retriever": {"top_k": 4}}))
    assert len(run(path)["variables"]["ret_ids"][1]) == 2  # $top_k from the server's set
    assert len(run(path, params)["variables"]["ret_ids"][1]) == 4  # over it, from --param
    params.write_text(yaml.safe_dump({"nope": {"top_k": 4}}))
    with pytest.raises(ConfigError, match="no server 'nope'"):
        run(path, params)


def test_problems_found_before_any_step(tmp_path: Path, servers: dict[str, Any]) -> None:
    path = pipeline(tmp_path, servers, [
        "retriever.retriever_init",
        "retrieve.retriever_search",
        "retriever.no_such_tool",
        {"retriever.bm25_search": {"input": {"queries": "q_ls"}}},
        "retriever.retriever_search",
        {"loop": {"times": 2, "steps": ["eval.evaluate"]}},
    ])
    with pytest.raises(ConfigError) as e:
        run(path)
    text = str(e.value)
    lines = path.read_text().splitlines()

    def line_of(step: str, nth: int = 1) -> int:
        return [n for n, line in enumerate(lines, start=1) if line.startswith(f"- {step}")][nth - 1]

    for line, says in ((line_of("retrieve.retriever_search"), "unknown server 'retrieve'"),
                       (line_of("retriever.no_such_tool"), "no tool 'no_such_tool'"),
                       (line_of("retriever.bm25_search"), "input 'queries' is not one it reads"),
                       (line_of("retriever.retriever_search"), "variable 'q_ls' is made by no earlier step")):
        assert f"pipe.yaml:{line}: " in text and says in text, (line, says)
    assert "unknown server 'eval'" in text
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(("text", "says"), [
    pytest.param("servers: {}\n", "`pipeline:`", id="no-pipeline"),
    pytest.param("servers: {}\npipeline:\n- justaname\n", "pipe.yaml:3: 'justaname' is not `server.tool`", id="no-dot"),
    pytest.param("servers: {}\npipeline:\n- loop: {times: x, steps: []}\n", "pipe.yaml:3: loop needs", id="loop-times"),
    pytest.param("servers: {}\npipeline:\n- a.b: {inputs: {}}\n", "takes `input:` and `output:`", id="bad-key"),
])
def test_grammar_errors_name_the_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "pipe.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=None) as e:
        run(path)
    assert says in str(e.value)


def test_a_failing_step_is_named(tmp_path: Path, servers: dict[str, Any]) -> None:
    path = pipeline(tmp_path, servers, ["data.load_queries", "retriever.retriever_search"])
    with pytest.raises(RetrieverError, match=r"step 2 \(retriever.retriever_search, .*pipe.yaml:\d+\) failed: "
                                             r".*call retriever_init first"):
        run(path)


def test_cli_runs_the_example_pipeline() -> None:
    proc = run_cli("--log-level", "WARNING", "run", "pipelines/add_delete.yaml", "--output", "/dev/null")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[step 4] notes.retriever_add" in proc.stderr  # progress on stderr
    assert json.loads(proc.stdout)["steps"] == 7


@pytest.mark.slow
def test_scifact_pipeline_metrics_equal_retriever_eval(tmp_path: Path) -> None:
    """BM25 (built in seconds): the pipeline's metrics are `retriever eval --mode bm25`'s."""
    project = write_project(tmp_path / "sf", SCIFACT / "corpus.jsonl", backend="bm25")
    path = pipeline(tmp_path, {
        "retriever": {"kind": "retriever", "config": str(project), "set": {"top_k": 100}},
        "data": {"kind": "data", "params": {"queries_path": str(SCIFACT / "queries.jsonl"),
                                            "qrels_path": str(SCIFACT / "qrels" / "test.tsv")}},
        "eval": {"kind": "eval", "params": {"qrels_path": str(SCIFACT / "qrels" / "test.tsv"),
                                            "run_file": str(tmp_path / "run.trec")}},
    }, ["data.load_queries", "retriever.retriever_init", "retriever.bm25_index", "retriever.bm25_search",
        "eval.evaluate"])
    metrics = run(path)["variables"]["metrics"]
    expected = cli_json("--log-level", "WARNING", "eval", "--config", str(project), "--mode", "bm25", "--queries",
                        str(SCIFACT / "queries.jsonl"), "--qrels", str(SCIFACT / "qrels" / "test.tsv"), "--json")
    assert {k: metrics[k] for k in ("ndcg@10", "recall@100", "mrr@10", "queries")} == {
        k: expected[k] for k in ("ndcg@10", "recall@100", "mrr@10", "queries")}
    assert metrics["ndcg@10"] > 0.6 and (tmp_path / "run.trec").stat().st_size > 0
    assert ROOT.is_dir()


def test_an_mcp_server_over_streamable_http(tmp_path: Path, servers: dict[str, Any], http_server: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELINE_TOKEN", "tok-new-222")
    servers["remote"] = {"url": http_server, "token_env": "PIPELINE_TOKEN"}
    out = run(pipeline(tmp_path, servers, [
        "data.load_queries",
        {"remote.bm25_search": {"input": {"query_list": "q_ls"}, "output": {"ret_ids": "remote_ids"}}},
    ]))
    assert out["variables"]["remote_ids"][0][0] == "doc15"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["search", "fanout"])
def test_example_pipelines_run_as_they_are(name: str, tmp_path: Path) -> None:
    proc = run_cli("--log-level", "WARNING", "run", f"pipelines/{name}.yaml", "--output", str(tmp_path / "out.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    variables = json.loads((tmp_path / "out.json").read_text())["variables"]
    ids = variables["dense_ids" if name == "search" else "ret_ids"]
    assert ids[0][0] == "doc15" and len(ids) == 3


def test_another_server_s_reply_is_data_the_guard_checks(tmp_path: Path, servers: dict[str, Any]) -> None:
    """A reply naming paths outside the folders the server may use does not make our tools read or
    write there (issue 31: retriever_build_image_corpus wrote where another server's reply said)."""
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    servers = {**servers, "router": {**servers["router"], "params": {"where": str(outside)}}}
    path = pipeline(tmp_path, servers, ["router.places", "retriever.retriever_build_image_corpus"])
    with pytest.raises(RetrieverError, match="outside the folders this server may use"):
        run(path)
    assert list(outside.iterdir()) == []
