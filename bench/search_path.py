"""The search path's shape, before and after a refactor (issue 46), from two checkouts of this
repository, each measured in its own process with PYTHONPATH at its servers/:

- one agent `search` (hybrid, the default) through FastMCP's client in memory, on the sample
  corpus: the retriever frames on the stack where BM25's index is searched (hops, and the modules
  they are in). The agent's call runs on the compute thread, so the frames counted are those
  from the compute thread's worker down; the MCP client's and server's frames above it are not;
- the validations of that call's arguments: by the tool function's signature (a TypeAdapter of a
  function, as FastMCP and the stdio server check a call) and of request models (api/models.py
  Request subclasses: __init__ and model_validate); and HybridConfig validations;
- functions of engine/, search/ and api/ with 7 or more parameters, and the longest.

    .venv/bin/python bench/search_path.py --before <rev> [--after <rev>]

A git worktree of each <rev> is made under a temporary folder (--after defaults to the working
tree). Writes section `search-path` of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from report import checkout, remove_checkouts, write_section

PROBE = r'''
import asyncio, json, sys, tempfile, traceback
from pathlib import Path
import pydantic
import retriever
root = Path(retriever.__file__).parent
try:
    from retriever.testing.projects import engine_for, write_project
except ImportError:  # a checkout from before retriever.testing held them
    sys.path.insert(0, str(root.parent.parent / "tests"))
    from conftest import engine_for, write_project
from fastmcp import Client
from retriever.api.models import Request
from retriever.config import HybridConfig
from retriever.indexes import bm25 as bm25_module
from retriever.mcp.server import build_server

e = engine_for(write_project(Path(tempfile.mkdtemp()) / "p"))
e.init(); e.embed(progress=False); e.index(); e.bm25_index(progress=False)
stacks, counts = [], {"signatures": 0, "requests": 0, "hybrid_config": 0}
search = bm25_module.BM25Index.search
def traced(self, *a, **k):
    stacks.append([f for f in traceback.extract_stack() if f.filename.startswith(str(root))])
    return search(self, *a, **k)
bm25_module.BM25Index.search = traced
init, validate = pydantic.BaseModel.__init__, pydantic.BaseModel.model_validate.__func__
def count(cls):
    counts["requests"] += issubclass(cls, Request)
    counts["hybrid_config"] += issubclass(cls, HybridConfig)
def counting_init(self, *a, **k):
    count(type(self))
    init(self, *a, **k)
@classmethod
def counting_validate(cls, *a, **k):
    count(cls)
    return validate(cls, *a, **k)
pydantic.BaseModel.__init__, pydantic.BaseModel.model_validate = counting_init, counting_validate
adapted = pydantic.TypeAdapter.validate_python
def counting_adapted(self, *a, **k):
    schema = self.core_schema  # a function's arguments (a 'call' schema): a tool's signature
    counts["signatures"] += (schema["schema"] if schema["type"] == "definitions" else schema)["type"] == "call"
    return adapted(self, *a, **k)
pydantic.TypeAdapter.validate_python = counting_adapted
server = build_server(e, profile="agent")
async def main():
    async with Client(server) as client:
        await client.call_tool("search", {"query": "what causes tides"})  # warm
        stacks.clear(); counts.update(signatures=0, requests=0, hybrid_config=0)
        await client.call_tool("search", {"query": "what causes tides"})
asyncio.run(main())
frames = [f"{Path(f.filename).relative_to(root)}:{f.name}" for f in stacks[0]]
print(json.dumps({"frames": frames, **counts}))
'''


def long_signatures(servers: Path) -> list[tuple[int, str]]:
    out = []
    for package in ("engine", "search", "api"):
        for path in sorted((servers / "retriever" / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")]
                    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
                    if n >= 7:
                        out.append((n, f"{package}/{path.name}:{node.name}"))
    return sorted(out, reverse=True)


def measure(servers: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "PYTHONPATH": str(servers)},
                          capture_output=True, text=True, check=False, cwd=servers.parent)
    if proc.returncode:
        raise SystemExit(f"the probe failed in {servers}: {proc.stderr[-2000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    found["long"] = long_signatures(servers)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", help="default: the working tree")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="search-path-"))
    try:
        sides = {"before": (args.before, measure(checkout(args.before, work))),
                 "after": (args.after or "the working tree", measure(checkout(args.after, work)))}
    finally:  # the worktrees made for the two checkouts go again
        remove_checkouts(work)
    rows = []
    for label, key in (("frames (hops) under the compute hop, to BM25's index search", "hops"),
                       ("modules they are in", "modules"),
                       ("validations of the arguments (the two rows below)", "validations"),
                       ("by the tool's signature", "signatures"), ("request models validated", "requests"),
                       ("HybridConfig validations", "hybrid_config"),
                       ("functions with 7+ parameters (engine/, search/, api/)", "n_long"),
                       ("the longest signature", "longest")):
        cells = []
        for _, m in sides.values():
            value = {"hops": len(m["frames"]), "modules": len({f.split(":")[0] for f in m["frames"]}),
                     "validations": m["signatures"] + m["requests"],
                     "n_long": len(m["long"]), "longest": f"{m['long'][0][0]} ({m['long'][0][1]})" if m["long"] else "-",
                     }.get(key, m.get(key))
            cells.append(str(value))
        rows.append(f"| {label} | {cells[0]} | {cells[1]} |")
    (b, before), (a, after) = sides.values()
    body = (f"`.venv/bin/python bench/search_path.py --before {args.before}"
            f"{' --after ' + args.after if args.after else ''}`: one agent `search` (hybrid) through FastMCP's "
            "in-memory client on the sample corpus; frames from the compute thread's worker down (the MCP "
            "layers above the compute hop are not counted).\n\n"
            f"| measure | before ({b}) | after ({a}) |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
            f"Before: {' > '.join(before['frames'])}\n\nAfter: {' > '.join(after['frames'])}\n")
    write_section("search-path", body)
    print(body)


if __name__ == "__main__":
    main()
