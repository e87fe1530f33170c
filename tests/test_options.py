"""Options: instructions applied once, missing prompts and GPUs are warnings, zh BM25, inactive keys."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import MCP
from retriever.errors import ConfigError, NotYetSupportedError
from retriever.testing.projects import engine_for, write_project

INSTR = "Represent this question for retrieving passages: "


def test_query_instruction_is_applied_exactly_once(built) -> None:
    plain = built.embedder.encode_queries  # MiniLM's query prompt is empty: no instruction, nothing added
    want = plain([INSTR + "black holes"], "")[0]
    twice = plain([INSTR + INSTR + "black holes"], "")[0]
    for query in ("black holes", INSTR + "black holes"):  # already carrying it: not added again
        got = built.embedder.encode_queries([query], INSTR)[0]
        assert np.allclose(got, want, atol=1e-5)
        assert not np.allclose(got, twice, atol=1e-3)


def test_query_instruction_from_yaml_and_per_call_override(tmp_path: Path, built_project: Path) -> None:
    path = write_project(tmp_path / "p", query_instruction=INSTR)
    e = engine_for(path)
    e.init()
    e.embed(progress=False)
    e.index()
    with_yaml = e.search("black holes", top_k=30, mode="dense")[0]
    per_call = e.search("black holes", top_k=30, query_instruction="", mode="dense")[0]
    plain = engine_for(built_project)
    plain.init()
    assert [h.id for h in per_call] == [h.id for h in plain.search("black holes", top_k=30, mode="dense")[0]]
    assert [h.score for h in with_yaml] != [h.score for h in per_call]


def test_unknown_prompt_name_is_a_warning_not_a_failed_search(tmp_path: Path) -> None:
    path = write_project(tmp_path / "p", backend_configs={
        "sentence_transformers": {"sentence_transformers_encode": {"q_prompt_name": "no_such_prompt"}}})
    mcp = MCP(engine_for(path))
    status = mcp.ok("retriever_init")
    assert any("no_such_prompt" in w for w in status["warnings"])
    mcp.ok("retriever_embed")
    mcp.ok("retriever_index")
    assert mcp.ok("retriever_search", {"query_list": "black holes", "top_k": 1})["ret_ids"] == [["doc07"]]


def test_gpu_options_without_a_gpu_warn_then_use_the_cpu(tmp_path: Path) -> None:
    path = write_project(tmp_path / "p", gpu_ids="0",
                         index_backend_configs={"faiss": {"index_use_gpu": True, "index_path": "out/faiss"}})
    mcp = MCP(engine_for(path))
    status = mcp.ok("retriever_init")
    assert any("no CUDA device" in w for w in status["warnings"])
    mcp.ok("retriever_embed")
    built = mcp.ok("retriever_index")
    assert any("FAISS sees no GPU" in w for w in built["warnings"])
    assert mcp.ok("retriever_search", {"query_list": "black holes", "top_k": 1})["ret_ids"] == [["doc07"]]


ZH = [
    {"id": "z1", "contents": "北京是中华人民共和国的首都，也是政治和文化中心。"},
    {"id": "z2", "contents": "上海是中国最大的经济中心和国际港口城市。"},
    {"id": "z3", "contents": "熊猫主要生活在四川的竹林里，以竹子为食。"},
]


def test_chinese_bm25_with_jieba(tmp_path: Path) -> None:
    corpus = tmp_path / "zh.jsonl"
    corpus.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in ZH), encoding="utf-8")
    path = write_project(tmp_path / "p", corpus=corpus, backend="bm25",
                         backend_configs={"bm25": {"lang": "zh", "save_path": "out/bm25"}})
    mcp = MCP(engine_for(path))
    mcp.ok("retriever_init")
    mcp.ok("bm25_index")
    assert mcp.ok("bm25_search", {"query_list": ["熊猫吃什么", "中国的首都"], "top_k": 1})["ret_ids"] == [["z3"], ["z1"]]
    # Reloaded by retriever_init in a new engine; a lang change is refused with a clear error.
    assert MCP(engine_for(path)).ok("retriever_init")["bm25_index"] == 3
    other = write_project(tmp_path / "p", corpus=corpus, backend="bm25",
                          backend_configs={"bm25": {"lang": "en", "save_path": "out/bm25"}})
    assert "built for lang 'zh'" in MCP(engine_for(other)).error("retriever_init")


def test_bm25_backend_has_no_dense_search(tmp_path: Path) -> None:
    mcp = MCP(engine_for(write_project(tmp_path / "p", backend="bm25")))
    mcp.ok("retriever_init")
    assert "use bm25_search" in mcp.error("retriever_search", {"query_list": "x"})


@pytest.mark.parametrize(
    "overrides, message",
    [
        pytest.param({"backend": "infinity"}, "set backend_configs.infinity.url", id="infinity-without-url"),
    ],
)
def test_inactive_options_fail_clearly_at_init(project: Path, overrides: dict, message: str) -> None:
    with pytest.raises(NotYetSupportedError, match=message):
        engine_for(project).init(**overrides)


def test_demo_mode_needs_milvus(project: Path) -> None:
    with pytest.raises(ConfigError, match="is_demo keeps every document in Milvus: set index_backend: milvus"):
        engine_for(project).init(is_demo=True)


def test_init_arguments_override_the_yaml_for_that_session_only(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "only", "contents": "a single passage about volcanoes"}) + "\n")
    e = engine_for(project)
    assert e.init(corpus_path=str(other), top_k=2)["corpus"]["documents"] == 1
    assert e.config.top_k == 2
    e.bm25_index(progress=False, overwrite=True)
    assert [h.id for h in e.bm25_search("volcanoes")[0]] == ["only"]
    assert engine_for(project).init(overwrite=True)["corpus"]["documents"] == 30  # the YAML is unchanged
