"""The main job on the embedded default, end to end through the MCP server over stdio.

Starts `retriever serve` as a subprocess, builds the dense and BM25 indexes of the shipped
sample corpus through the tools, and prints the ranked passages for a few queries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

QUERIES = [
    "How do plants turn sunlight into sugar?",
    "why do antibiotics not work against the flu",
    "what causes earthquakes",
]


async def main(config: Path) -> None:
    server = StdioTransport(
        command=str(Path(sys.executable).with_name("retriever")),
        args=["--log-level", "WARNING", "serve", "--tools", "full", "--config", str(config)],
    )
    async with Client(server, timeout=600) as client:
        steps = [
            ("retriever_init", {}),
            ("retriever_embed", {"overwrite": True}),
            ("retriever_index", {"overwrite": True}),
            ("bm25_index", {"overwrite": True}),
        ]
        for tool, args in steps:
            result = await client.call_tool(tool, args)
            print(f"{tool}: {result.content[0].text}")
        for tool in ("retriever_search", "bm25_search", "retriever_hybrid_search"):
            answer = await client.call_tool(tool, {"query_list": QUERIES, "top_k": 3})
            result = json.loads(answer.content[0].text)  # every reply's JSON (structured content too when small)
            print(f"\n=== {tool} (top 3) ===")
            for query, ids, scores, texts in zip(QUERIES, result["ret_ids"], result["ret_scores"], result["ret_psg"]):
                print(f"\nQ: {query}")
                for rank, (doc_id, score, text) in enumerate(zip(ids, scores, texts), start=1):
                    print(f"  {rank}. [{doc_id}] {score:.3f}  {text}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", type=Path, default=Path("parameter.yaml"))
    asyncio.run(main(p.parse_args().config.resolve()))
