"""Every tool's arguments fuzzed through the in-memory client (hypothesis): no unhandled
exception, every failure a tool error with a message, the server still answering afterwards; and
no key, from the YAML or the environment, in any result, error or log line when calls fail."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_built, engine_for
from embedding_servers import FakeServer
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retriever.mcp import build_server

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
    engine = engine_for(copy_built(built_project, tmp_path_factory.mktemp("fuzz") / "p"))
    engine.init()
    return build_server(engine, profile="full")


def _tools(server: Any) -> dict[str, list[str]]:
    async def run() -> dict[str, list[str]]:
        async with Client(server) as client:
            return {t.name: list(t.input_schema.get("properties", {})) for t in await client.list_tools()}

    return asyncio.run(run())


def test_every_tool_survives_fuzzed_arguments(fuzz_server: Any) -> None:
    tools = _tools(fuzz_server)
    assert len(tools) >= 19
    names = sorted(tools)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(tool=st.sampled_from(names), data=st.data())
    def check(tool: str, data: st.DataObject) -> None:
        params = tools[tool]
        keys = data.draw(st.lists(st.sampled_from(params + ["unknown_arg"]), unique=True, max_size=len(params) + 1)
                         if params else st.just([]))
        args = {k: data.draw(plausible | json_values) for k in keys}

        async def run() -> Any:
            async with Client(fuzz_server) as client:
                return await client.call_tool(tool, args, raise_on_error=False)

        result = asyncio.run(run())
        if result.is_error:
            assert result.content and result.content[0].text.strip(), (tool, args)
            assert "Traceback" not in result.content[0].text

    check()

    async def still() -> Any:
        async with Client(fuzz_server) as client:
            await client.call_tool("retriever_init", {})
            return await client.call_tool("bm25_search", {"query_list": "earthquakes", "top_k": 1})

    assert asyncio.run(still()).structured_content["ret_ids"][0]


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
