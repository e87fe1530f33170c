"""The pipeline YAML (UltraRAG's grammar), parsed into steps that remember their line:

    servers: {alias: <server>, ...}           # see runner.py for the kinds of server
    pipeline:
    - alias.tool                              # a call: inputs and outputs by their declared names
    - alias.tool:
        input: {declared_input: variable}     # read another pipeline variable
        output: {reply_key: variable}         # keep a reply key under another name
    - loop: {times: N, steps: [...]}
    - branch:
        router: [alias.tool]                  # its reply's `state` picks the branch
        branches: {state: [...], ...}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError


@dataclass
class ToolIO:
    """What a tool reads and returns, by declared names."""

    inputs: dict[str, str]  # argument -> `$param` or declared variable
    outputs: list[str] | None  # reply keys kept (None: all)
    optional: set[str] = field(default_factory=set)  # arguments left out when their source is missing


@dataclass(frozen=True)
class Call:
    line: int
    server: str
    tool: str
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.server}.{self.tool}"


@dataclass(frozen=True)
class Loop:
    line: int
    times: int
    steps: list[Step]


@dataclass(frozen=True)
class Branch:
    line: int
    router: list[Step]
    branches: dict[str, list[Step]]


Step = Call | Loop | Branch


@dataclass(frozen=True)
class Pipeline:
    path: Path
    servers: dict[str, Any]
    steps: list[Step]


def _plain(node: yaml.Node) -> Any:
    return yaml.safe_load(yaml.serialize(node))


def _mapping(node: yaml.Node) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise ValueError("expected a mapping")
    return {k.value: v for k, v in node.value}


def load_pipeline(path: Path) -> Pipeline:
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: cannot read the pipeline: {e}") from None
    where = f"{path}:1"
    try:
        top = _mapping(root) if root is not None else {}
        servers = _plain(top["servers"]) if "servers" in top else {}
        if not isinstance(servers, dict) or "pipeline" not in top:
            raise ValueError("a pipeline has `servers:` (a mapping) and `pipeline:` (a list of steps)")
        return Pipeline(path, servers, _steps(top["pipeline"], path))
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None


def _steps(node: yaml.Node, path: Path) -> list[Step]:
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{path}:{node.start_mark.line + 1}: expected a list of steps")
    return [_step(item, path) for item in node.value]


def _step(node: yaml.Node, path: Path) -> Step:
    line = node.start_mark.line + 1
    at = f"{path}:{line}"
    if isinstance(node, yaml.ScalarNode):
        return _call(str(node.value), {}, line, at)
    if not isinstance(node, yaml.MappingNode) or len(node.value) != 1:
        raise ConfigError(f"{at}: a step is `server.tool`, `server.tool: {{input, output}}`, `loop:` or `branch:`")
    key, body = node.value[0][0].value, node.value[0][1]
    if key == "loop":
        spec = _mapping(body)
        times = _plain(spec["times"]) if "times" in spec else None
        if not isinstance(times, int) or times < 0 or "steps" not in spec:
            raise ConfigError(f"{at}: loop needs `times` (a whole number) and `steps`")
        return Loop(line, times, _steps(spec["steps"], path))
    if key == "branch":
        spec = _mapping(body)
        if "router" not in spec or "branches" not in spec:
            raise ConfigError(f"{at}: branch needs `router` (steps) and `branches` (state: steps)")
        branches = {k: _steps(v, path) for k, v in _mapping(spec["branches"]).items()}
        return Branch(line, _steps(spec["router"], path), branches)
    return _call(key, _plain(body) or {}, line, at)


def _call(name: str, body: Any, line: int, at: str) -> Call:
    server, dot, tool = name.partition(".")
    if not dot or not server or not tool:
        raise ConfigError(f"{at}: {name!r} is not `server.tool`")
    if not isinstance(body, dict) or set(body) - {"input", "output"}:
        raise ConfigError(f"{at}: {name} takes `input:` and `output:` mappings only")
    inputs, outputs = body.get("input") or {}, body.get("output") or {}
    if not isinstance(inputs, dict) or not isinstance(outputs, dict):
        raise ConfigError(f"{at}: {name}: input and output are mappings (declared name: variable)")
    return Call(line, server, tool, {str(k): str(v) for k, v in inputs.items()},
                {str(k): str(v) for k, v in outputs.items()})
