"""The servers a pipeline calls, behind one shape: the tools they have, what each reads and
returns, and a call. Kinds (`servers:` in the pipeline YAML):

- `retriever` or `{kind: retriever, config: parameter.yaml, set: {...}, params: {...}}`: this
  server's tools in process, no MCP round trip, whole replies; `set` overrides config keys (as
  `--set` does), `params` adds `$keys` that are not config keys (ids, collections, ...). A
  tool's inputs and outputs are those `build` declares for UltraRAG (pipeline/ultrarag.py).
- `data` / `eval` (or `{kind: data, params: {...}}`): built-in steps (builtins.py).
- `{command: [program, arg, ...], cwd?, params?}`: any MCP server over stdio;
  `{url: http://127.0.0.1:PORT/mcp, token_env?, params?}`: over streamable HTTP. A tool reads
  each of its arguments from the pipeline variable of that name (or `$name` of `params`), and
  every key of its reply becomes a variable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, RetrieverError
from .grammar import ToolIO


class Server:
    params: dict[str, Any]
    tools: dict[str, ToolIO]

    async def start(self) -> None: ...

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def close(self) -> None: ...


class InProcess(Server):
    """This server's tools (every tool of the registry but `build`), called in process: the
    blocking ones on a worker thread, whole replies."""

    def __init__(self, config: Path, overrides: dict[str, Any], params: dict[str, Any]) -> None:
        from ..api.registry import TOOLS
        from ..api.ultrarag import server_io
        from ..config import deep_merge, load_config
        from ..engine.retriever import Retriever

        self.params = {**deep_merge(yaml.safe_load(config.read_text(encoding="utf-8")) or {}, overrides), **params}
        cfg = load_config(config, deep_merge(overrides, {"reply": {"max_bytes": 0}}))
        self.engine = Retriever(cfg, config.resolve().parent)
        self.registry = {t.name: t for t in TOOLS if t.name != "build"}
        io = server_io(self.registry.values(), self.params)
        self.tools = {name: ToolIO(e.get("input", {}), e.get("output", [])) for name, e in io.items()}

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        import asyncio
        import contextvars
        import inspect

        from ..security.guard import FROM_CLIENT

        spec = self.registry[tool]
        request = spec.request.model_validate(args)
        # A step's arguments may come from another server's reply: data, not the operator's word.
        # Paths, endpoints and writes are checked as for a client's call (guard.py).
        ctx = contextvars.copy_context()
        ctx.run(FROM_CLIENT.set, True)
        if inspect.iscoroutinefunction(spec.call):
            return await asyncio.get_running_loop().create_task(spec.call(self.engine, request), context=ctx)
        return await asyncio.to_thread(ctx.run, spec.call, self.engine, request)


class Builtin(Server):
    def __init__(self, kind: str, params: dict[str, Any], base_dir: Path) -> None:
        from .builtins import BUILTINS

        self.params, self.base_dir = params, base_dir
        self.functions = BUILTINS[kind]
        self.tools = {name: io for name, (io, _) in self.functions.items()}

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.functions[tool][1](self.base_dir, **args)


class External(Server):
    """Another MCP server, over stdio or streamable HTTP."""

    def __init__(self, spec: dict[str, Any], base_dir: Path) -> None:
        from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

        self.params = dict(spec.get("params") or {})
        self.tools = {}
        if "command" in spec:
            command = [str(c) for c in spec["command"]]
            cwd = (base_dir / spec["cwd"]) if spec.get("cwd") else base_dir
            self.transport: Any = StdioTransport(command=command[0], args=command[1:], cwd=str(cwd),
                                                 env=dict(os.environ))
        else:
            headers = {}
            if spec.get("token_env"):
                headers["Authorization"] = f"Bearer {os.environ.get(spec['token_env'], '')}"
            self.transport = StreamableHttpTransport(str(spec["url"]), headers=headers)

    async def start(self) -> None:
        from fastmcp import Client

        self.client = Client(self.transport)
        await self.client.__aenter__()
        for tool in await self.client.list_tools():
            schema = tool.input_schema or {}
            names = list((schema.get("properties") or {}).keys())
            required = set(schema.get("required") or [])
            inputs = {n: f"${n}" if n in self.params else n for n in names}
            self.tools[tool.name] = ToolIO(inputs, None, {n for n in names if n not in required})

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        text = getattr(result.content[0], "text", "") if result.content else ""
        if result.is_error:
            raise RetrieverError(text or "the tool failed")
        try:
            reply = json.loads(text) if text else {}
        except json.JSONDecodeError:
            reply = {"text": text}
        return reply if isinstance(reply, dict) else {"result": reply}

    async def close(self) -> None:
        await self.client.__aexit__(None, None, None)


def make_server(alias: str, spec: Any, base_dir: Path) -> Server:
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        raise ConfigError(f"servers.{alias}: a kind (retriever, data, eval) or a mapping")
    kind = spec.get("kind")
    if kind == "retriever":
        config = base_dir / str(spec.get("config", "parameter.yaml"))
        if not config.is_file():
            raise ConfigError(f"servers.{alias}: no parameter file at {config} (set config:)")
        return InProcess(config, dict(spec.get("set") or {}), dict(spec.get("params") or {}))
    if kind in ("data", "eval"):
        return Builtin(kind, dict(spec.get("params") or {}), base_dir)
    if kind is None and ("command" in spec or "url" in spec):
        return External(spec, base_dir)
    raise ConfigError(f"servers.{alias}: unknown server {spec!r}; kinds: retriever, data, eval, "
                      "{command: [...]} (stdio), {url: ...} (streamable HTTP)")
