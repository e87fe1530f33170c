"""What an agent pays for our tool list on every turn: per profile, the tools, bytes and tokens of
`tools/list` as the stock fastmcp client receives it (the `tools` array, compact JSON), counted
with OpenAI's o200k and cl100k tables (bpe-openai, offline). `--before REV` measures a commit's
server too (a git worktree of it, imported in a subprocess) for the before/after table. Writes
its section of bench/RESULTS.md and the table of docs/agent.md (between their markers).

    .venv/bin/python bench/agent_surface.py --before a2b1e21
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from report import ROOT, write_section

PROFILES_PAGE = ROOT / "docs" / "agent.md"

# (label, profile, read_only, YAML overrides, ultrarag mode)
CASES = [
    ("agent (shipped parameter.yaml; the default of `serve`)", "agent", False, {}, False),
    ("agent, a web provider with a key", "agent", False, {"websearch_backend": "tavily"}, False),
    ("agent, read-only", "agent", True, {}, False),
    ("ultrarag (`serve --ultrarag`)", "ultrarag", False, {}, True),
    ("full (shipped parameter.yaml)", "full", False, {}, False),
    ("full, read-only", "full", True, {}, False),
    ("full, every need met (llm, keys from calls)", "full", False,
     {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}, "security": {"client_endpoints": True}}, True),
]

# Run in a subprocess against an old commit's package: its build_server lists every tool.
BEFORE = """
import asyncio, json, sys
from fastmcp import Client
from retriever import Retriever
from retriever.config import Config
from retriever.mcp.server import build_server

async def main(read_only):
    async with Client(build_server(Retriever(Config()), read_only=read_only)) as client:
        return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await client.list_tools()]

print(json.dumps(asyncio.run(main(sys.argv[1] == "1"))))
"""


def measure(tools: list[dict[str, Any]]) -> dict[str, int]:
    import bpe_openai

    text = json.dumps(tools, separators=(",", ":"))
    return {"tools": len(tools), "bytes": len(text.encode()),
            "o200k": len(bpe_openai.get_encoding("o200k_base").encode(text)),
            "cl100k": len(bpe_openai.get_encoding("cl100k_base").encode(text))}


def listing(profile: str, read_only: bool, overrides: dict[str, Any], ultrarag: bool) -> list[dict[str, Any]]:
    from fastmcp import Client
    from retriever import Retriever
    from retriever.config import Config
    from retriever.mcp.server import build_server

    cfg = Config.model_validate({**overrides, **({"security": {"client_endpoints": True}} if ultrarag else {})})
    engine = Retriever(cfg)
    engine.ultrarag = ultrarag

    async def run() -> list[dict[str, Any]]:
        async with Client(build_server(engine, read_only=read_only, profile=profile)) as client:
            return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await client.list_tools()]

    return asyncio.run(run())


def before(rev: str) -> list[tuple[str, dict[str, int]]]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree / "servers")}
            rows = []
            for read_only, label in ((False, "every tool"), (True, "`--read-only`")):
                out = subprocess.run([sys.executable, "-c", BEFORE, "1" if read_only else "0"], env=env, check=True,
                                     capture_output=True, text=True, cwd=tmp)
                rows.append((f"before ({rev}): {label}", measure(json.loads(out.stdout))))
            return rows
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)


def table(rows: list[tuple[str, dict[str, int]]]) -> str:
    lines = ["| profile | tools | bytes | tokens (o200k) | tokens (cl100k) |", "|---|---|---|---|---|"]
    lines += [f"| {label} | {m['tools']} | {m['bytes']:,} | {m['o200k']:,} | {m['cl100k']:,} |" for label, m in rows]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--before", help="a commit to measure too (e.g. the last one before the registry)")
    args = p.parse_args()
    os.environ.setdefault("TAVILY_API_KEY", "tvly-measure-only")  # the web provider case: a key is set
    rows = before(args.before) if args.before else []
    rows += [(label, measure(listing(*case))) for label, *case in CASES]
    command = "`.venv/bin/python bench/agent_surface.py" + (f" --before {args.before}`" if args.before else "`")
    body = (f"## What `tools/list` costs an agent (`bench/agent_surface.py`, issue 26)\n\nProduced by {command}: the "
            "`tools` array of `tools/list` as the stock fastmcp client receives it, compact JSON, tokens counted "
            "with bpe-openai's tables.\n\n" + table(rows))
    write_section("agent-surface", body)
    write_section("agent-surface", table(rows), PROFILES_PAGE)
    print(table(rows))


if __name__ == "__main__":
    main()
