"""Every tool's arguments fuzzed through the in-memory client (hypothesis): no unhandled
exception, every failure a tool error with a message, the server still answering afterwards; and
no key, from the YAML or the environment, in any result, error or log line when calls fail."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_built
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retriever.api.registry import BY_NAME, TOOLS
from retriever.mcp.server import build_server
from retriever.testing.embedding_servers import FakeServer
from retriever.testing.projects import engine_for
from schema_strategies import from_schema

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# values of the right shape, so the fuzz also reaches past argument validation into the engine
plausible = st.sampled_from([
    "what causes earthquakes", ["a", "b"], [["a"], "b"], 0, 1, 3, -1, 10**9, True, False, "", "dense", "rrf",
    {"field": "meta.year", "operator": ">=", "value": 2020}, {"operator": "NOT", "conditions": []},
    {"field": "id", "operator": "in", "value": "doc01"}, [{"id": "z", "contents": "zebra"}], [{"contents": 3}],
    "../../etc/passwd", "/etc/passwd", "out/x.npy", "abc\n", 1e308, -0.0, ["doc01"],
])


@pytest.fixture(scope="module")
def fuzz_server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    config = copy_built(built_project, tmp_path_factory.mktemp("fuzz") / "p")
    (config.parent / "folder").mkdir()  # a source, so that sync_sources is listed and fuzzed too
    (config.parent / "folder" / "note.md").write_text("# Note\n\nA short note about tides.\n")
    engine = engine_for(config, {"sources": [{"path": "folder"}]})
    engine.init()
    return build_server(engine, profile="full")


def _tools(server: Any) -> dict[str, dict[str, Any]]:
    async def run() -> dict[str, dict[str, Any]]:
        async with Client(server) as client:
            return {t.name: t.input_schema for t in await client.list_tools()}

    return asyncio.run(run())


def _call(server: Any, tool: str, args: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, args, raise_on_error=False)

    return asyncio.run(run())


def check_invariants(tool: str, args: dict[str, Any], reply: dict[str, Any]) -> None:
    """What every successful search reply holds: at most top_k hits per query, unique ids per query,
    scores non-increasing, and (the agent's search, whose hits carry metadata) the filter respected."""
    from retriever.filters import matches, parse

    top_k = args.get("top_k") or 5
    if "results" in reply and tool == "search":
        lists = [[(h["id"], h["score"], h.get("metadata") or {}) for h in r["hits"]] for r in reply["results"]]
    elif "ret_ids" in reply and "ret_scores" in reply:
        parallel = [k for k in ("ret_psg", "ret_ids", "ret_scores", "ret_meta", "ret_collections") if k in reply]
        shapes = {k: [len(row) for row in reply[k]] for k in parallel}
        assert len({json.dumps(v) for v in shapes.values()}) == 1, (tool, args, shapes)  # parallel lists agree
        lists = [[(i, sc, None) for i, sc in zip(ids, scores)] for ids, scores in zip(reply["ret_ids"],
                                                                                     reply["ret_scores"])]
    else:
        return
    f = parse(args["filters"]) if tool == "search" and args.get("filters") else None
    for hits in lists:
        ids = [h[0] for h in hits]
        scores = [h[1] for h in hits]
        assert len(hits) <= top_k and len(set(ids)) == len(ids), (tool, args, ids)
        assert scores == sorted(scores, reverse=True), (tool, args, scores)
        if f is not None:
            assert all(matches(f, i, meta) for i, _, meta in hits), (tool, args, hits)


# Tools whose calls leave this process (web providers, an LLM, a deployed retriever) are not fuzzed here:
# their own tests drive them against local fakes (examples, not generated inputs); the build writes
# UltraRAG's server.yaml (test_ultrarag.py).
# UltraRAG's project memory is not listed with FAISS outside its mode (test_agent.py); sparse_index is
# not listed without a sparse model (test_sparse_faces.py drives it, with a tiny one built there).
# The tools that only read first (on the built collection), then those that change it.
ENGINE_TOOLS = sorted((t.name for t in TOOLS if not t.effects.open_world and t.name not in (
    "build", "retriever_project_memory_search", "sparse_index")), key=lambda n: not BY_NAME[n].effects.read_only)


def test_every_tool_survives_arguments_from_its_own_schema(fuzz_server: Any) -> None:
    """Arguments generated from each tool's input schema (valid ones, which reach the engine) and
    arbitrary ones: no internal error (a bug of ours), every failure a tool error with a message,
    invariants on every success, the server answering afterwards; per tool, a floor of calls
    that got past argument validation."""
    from collections import Counter

    schemas = _tools(fuzz_server)
    assert set(ENGINE_TOOLS) <= set(schemas)
    reached: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    succeeded: Counter[str] = Counter()

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(data=st.data())
    def check(tool: str, data: st.DataObject) -> None:
        schema = schemas[tool]
        if data.draw(st.sampled_from([True, True, True, False])):  # mostly valid arguments, from the schema itself
            args = data.draw(from_schema(schema))
        else:
            keys = data.draw(st.lists(st.sampled_from([*schema.get("properties", {}), "unknown_arg"]), unique=True))
            args = {k: data.draw(plausible | json_values) for k in keys}
        result = _call(fuzz_server, tool, args)
        calls[tool] += 1
        text = result.content[0].text if result.content else ""
        if result.is_error:
            assert text.strip() and "Traceback" not in text, (tool, args)
            assert "internal error" not in text, (tool, args, text)
            if "invalid arguments" not in text:
                reached[tool] += 1
        else:
            reached[tool] += 1
            succeeded[tool] += 1
            check_invariants(tool, args, result.structured_content or json.loads(text))

    for tool in ENGINE_TOOLS:
        check(tool)
    print("per tool: calls that succeeded, got past argument validation, made")
    for tool in ENGINE_TOOLS:
        print(f"  {tool:34} {succeeded[tool]:3} {reached[tool]:3} {calls[tool]:3}")
    assert [t for t in ENGINE_TOOLS if reached[t] < 3] == [], dict(reached)
    assert _call(fuzz_server, "retriever_init", {}).is_error is False  # still answering
    alive = _call(fuzz_server, "list_collections", {})
    assert not alive.is_error and alive.structured_content["collections"], alive.content[0].text


KEY = "sk-YAMLKEY-77aa88bb99cc"
ENV_KEY = "sk-ENVKEY-11dd22ee33ff"


@pytest.mark.parametrize("backend", ["openai", "infinity"])
@pytest.mark.parametrize("source", ["yaml", "env"])
def test_no_embedding_key_in_any_result_error_or_log(built_project: Path, tmp_path: Path, backend: str, source: str,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    key = KEY if source == "yaml" else ENV_KEY
    monkeypatch.setenv("RETRIEVER_API_KEY", ENV_KEY)
    server = FakeServer(dim=384)
    try:
        config = copy_built(built_project, tmp_path / "p")
        cfg = yaml.safe_load(config.read_text())
        cfg["backend"] = backend
        section = {"max_retries": 1, "timeout": 2, "api_key": KEY if source == "yaml" else None}
        section.update({"base_url": f"{server.url}", "model_name": "fake"} if backend == "openai"
                       else {"url": server.url, "model_name": "fake"})
        cfg["backend_configs"][backend].update(section)
        cfg["overwrite"] = True
        config.write_text(yaml.safe_dump(cfg))
        mcp = build_server(engine_for(config), profile="full")
        failures = [
            lambda r: (401, {"error": {"message": f"bad key {r.authorization}"}}),
            lambda r: (500, {"error": {"message": "x" * 285 + r.authorization}}),
            lambda r: (429, {"error": {"message": f"slow down {r.authorization}"}}),
            lambda r: (200, {"data": "not a list", "echo": r.authorization}),
            lambda r: (400, {"error": {"message": "y" * 295 + r.authorization}}),
        ]
        seen: list[str] = []

        async def run() -> None:
            async with Client(mcp) as client:
                seen.append(str(await client.call_tool("retriever_init", {}, raise_on_error=False)))
                for failure in failures:
                    server.behaviour = failure
                    for tool, args in (("retriever_search", {"query_list": "q"}), ("retriever_embed", {}),
                                       ("retriever_add", {"documents": [{"id": "n", "contents": "new"}]})):
                        seen.append(str(await client.call_tool(tool, args, raise_on_error=False)))

        asyncio.run(run())
        assert server.requests and all(r.authorization == f"Bearer {key}" for r in server.requests)
        assert sum("is_error=True" in s for s in seen) >= 10
        out, err = capfd.readouterr()
        text = "\n".join(seen) + caplog.text + out + err
        for secret in (KEY, ENV_KEY):
            assert not [secret[i : i + 6] for i in range(len(secret) - 5) if secret[i : i + 6] in text]
    finally:
        server.close()
