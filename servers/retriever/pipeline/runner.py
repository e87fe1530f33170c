"""`retriever run PIPELINE.yaml`: check the whole pipeline, then run its steps in order.

Checked before the first step runs, each problem named with its YAML line: an unknown server or
tool, an input mapped from a name the tool does not declare, a variable no earlier step makes,
a `$key` the server's parameters lack. A failing step stops the run with its index, name, line
and error. Variables live for the whole run; each step's declared outputs (renamed by its
`output:` mapping) become variables; `$key` outputs update the server's parameters. The result
file holds the last value of every variable and each step's time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, RetrieverError
from .grammar import Branch, Call, Loop, Pipeline, Step, ToolIO, load_pipeline
from .servers import Server, make_server

log = logging.getLogger("retriever.pipeline")


Progress = Callable[[str], None]


@dataclass
class Run:
    pipeline: Pipeline
    servers: dict[str, Server]
    progress: Progress
    variables: dict[str, Any] = field(default_factory=dict)
    timings: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0


class StepError(RetrieverError):
    pass


def check(pipeline: Pipeline, servers: dict[str, Server]) -> list[str]:
    """Every problem of `pipeline` against its servers, before anything runs."""
    problems: list[str] = []
    at = pipeline.path

    def walk(steps: list[Step], known: set[str], open_outputs: bool) -> tuple[set[str], bool]:
        for step in steps:
            if isinstance(step, Loop):
                known, open_outputs = walk(step.steps, known, open_outputs)
            elif isinstance(step, Branch):
                known, open_outputs = walk(step.router, known, open_outputs)
                if "state" not in known and not open_outputs:
                    problems.append(f"{at}:{step.line}: the router makes no `state` for the branch to follow")
                after = set(known)
                for branch in step.branches.values():
                    made, opened = walk(branch, set(known), open_outputs)
                    after |= made
                    open_outputs = open_outputs or opened
                known = after
            else:
                known, open_outputs = _check_call(step, servers, known, open_outputs, problems, at)
        return known, open_outputs

    walk(pipeline.steps, set(), False)
    return problems


def _check_call(step: Call, servers: dict[str, Server], known: set[str], open_outputs: bool, problems: list[str],
                at: Path) -> tuple[set[str], bool]:
    where = f"{at}:{step.line}: {step.name}"
    server = servers.get(step.server)
    if server is None:
        problems.append(f"{where}: unknown server {step.server!r} (servers: {', '.join(servers)})")
        return known, open_outputs
    io = server.tools.get(step.tool)
    if io is None:
        problems.append(f"{where}: {step.server} has no tool {step.tool!r} (it has: {', '.join(sorted(server.tools))})")
        return known, open_outputs
    declared = {src for src in io.inputs.values() if not src.startswith("$")}
    for name in set(step.inputs) - declared:
        problems.append(f"{where}: input {name!r} is not one it reads (it reads: {', '.join(sorted(declared)) or '-'})")
    for arg, src in io.inputs.items():
        if src.startswith("$"):
            if src[1:] not in server.params and arg not in io.optional:
                problems.append(f"{where}: ${src[1:]} is not in {step.server}'s parameters")
        elif step.inputs.get(src, src) not in known and arg not in io.optional and not open_outputs:
            problems.append(f"{where}: variable {step.inputs.get(src, src)!r} is made by no earlier step "
                            f"(map it with input: {{{src}: <variable>}})")
    if io.outputs is None:
        return known | set(step.outputs.values()), True
    made = {step.outputs.get(o, o) for o in io.outputs if not o.startswith("$")}
    return known | made, open_outputs


async def run_steps(r: Run, steps: list[Step], depth: int = 0) -> None:
    for step in steps:
        if isinstance(step, Loop):
            for _ in range(step.times):
                await run_steps(r, step.steps, depth + 1)
        elif isinstance(step, Branch):
            await run_branch(r, step, depth)
        else:
            await run_call(r, step)


def _routed(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, dict) and set(v) == {"data", "state"} for v in value)


async def run_branch(r: Run, step: Branch, depth: int) -> None:
    """The router's reply picks the branches. A list of `{"data", "state"}` items (UltraRAG's
    router output) routes each item: a branch runs on its items only, with every list variable
    of the same length cut to them, and the lists it makes are put back at their positions. A
    plain `state` sends the whole run down one branch."""
    before = dict(r.variables)
    await run_steps(r, step.router, depth + 1)
    routed = {k: v for k, v in r.variables.items() if _routed(v) and before.get(k) is not v}
    if not routed:
        state = r.variables.get("state")
        if state not in step.branches:
            raise StepError(f"{r.pipeline.path}:{step.line}: the router's state {state!r} has no branch "
                            f"(branches: {', '.join(step.branches)})")
        await run_steps(r, step.branches[state], depth + 1)
        return
    states = [item["state"] for item in next(iter(routed.values()))]
    n = len(states)
    if any(len(v) != n for v in routed.values()):
        raise StepError(f"{r.pipeline.path}:{step.line}: the router's lists differ in length")
    unknown = sorted(set(states) - set(step.branches))
    if unknown:
        raise StepError(f"{r.pipeline.path}:{step.line}: states {unknown} have no branch "
                        f"(branches: {', '.join(step.branches)})")
    for k, v in routed.items():
        r.variables[k] = [item["data"] for item in v]
    whole = dict(r.variables)
    merged = dict(whole)
    for state, steps in step.branches.items():
        rows = [i for i, s in enumerate(states) if s == state]
        if not rows:
            continue
        r.variables = {k: [v[i] for i in rows] if isinstance(v, list) and len(v) == n else v
                       for k, v in whole.items()}
        await run_steps(r, steps, depth + 1)
        for k, v in r.variables.items():
            if isinstance(v, list) and len(v) == len(rows) and (k not in whole or whole[k] is not v):
                full = merged[k] if isinstance(merged.get(k), list) and len(merged[k]) == n else [None] * n
                full = list(full)
                for i, value in zip(rows, v):
                    full[i] = value
                merged[k] = full
            elif k not in whole or whole[k] is not v:
                merged[k] = v
    r.variables = merged


async def run_call(r: Run, step: Call) -> None:
    r.count += 1
    server = r.servers[step.server]
    io = server.tools[step.tool]
    args = _arguments(r, server, io, step)
    t = time.perf_counter()
    r.progress(f"[step {r.count}] {step.name} (line {step.line})")
    try:
        reply = await server.call(step.tool, args)
    except Exception as e:
        raise StepError(f"step {r.count} ({step.name}, {r.pipeline.path}:{step.line}) failed: {e}") from e
    seconds = time.perf_counter() - t
    r.timings.append({"step": r.count, "name": step.name, "line": step.line, "seconds": round(seconds, 3)})
    r.progress(f"[step {r.count}] {step.name} done in {seconds:.2f} s")
    _keep(r, server, io, step, reply)


def _arguments(r: Run, server: Server, io: ToolIO, step: Call) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for arg, src in io.inputs.items():
        if src.startswith("$"):
            if src[1:] in server.params:
                args[arg] = server.params[src[1:]]
        else:
            name = step.inputs.get(src, src)
            if name in r.variables:
                args[arg] = r.variables[name]
            elif arg not in io.optional:
                raise StepError(f"step {r.count + 1} ({step.name}, line {step.line}): variable {name!r} is not set")
    return args


def _keep(r: Run, server: Server, io: ToolIO, step: Call, reply: dict[str, Any]) -> None:
    for key in io.outputs if io.outputs is not None else list(reply):
        name = key.lstrip("$")
        if name not in reply:
            raise StepError(f"step {r.count} ({step.name}, line {step.line}): the reply has no {name!r} "
                            f"(it has: {', '.join(reply)})")
        if key.startswith("$"):
            server.params[name] = reply[name]
        else:
            r.variables[step.outputs.get(name, name)] = reply[name]


def load_params(path: Path | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"{path}: a parameter file maps each server's alias to its parameters")
    return data


async def run_pipeline(path: Path, params_file: Path | None = None, output: Path | None = None,
                       progress: Progress = log.info) -> dict[str, Any]:
    """Check and run the pipeline at `path`; each step's start and end go to `progress`."""
    pipeline = load_pipeline(path)
    base = path.resolve().parent
    servers = {alias: make_server(alias, spec, base) for alias, spec in pipeline.servers.items()}
    started: list[Server] = []
    try:
        for server in servers.values():
            await server.start()
            started.append(server)
        for alias, values in load_params(params_file).items():
            if alias not in servers:
                raise ConfigError(f"{params_file}: no server {alias!r} in {path}")
            servers[alias].params.update(values)
        problems = check(pipeline, servers)
        if problems:
            raise ConfigError("the pipeline is not valid:\n  " + "\n  ".join(problems))
        r = Run(pipeline, servers, progress)
        t = time.perf_counter()
        await run_steps(r, pipeline.steps)
        result = {"pipeline": str(path), "seconds": round(time.perf_counter() - t, 3), "steps": r.timings,
                  "variables": r.variables}
    finally:
        for server in reversed(started):
            await server.close()
    out = output or base / "output" / f"{path.stem}_{time.strftime('%Y%m%d_%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, ensure_ascii=False, default=str), encoding="utf-8")
    result["output"] = str(out)
    return result
