"""MCP over streamable HTTP with concurrent clients: does running a small search whole on the compute
thread (mcp/serving.py `serve_call`) cost throughput when many clients share one server? This tree's
server against a baseline tree's (`--baseline DIR`, e.g. a `git worktree` of the commit before that
change: the whole trees are compared, so other changes since count too), each `retriever serve
--transport http --init` on SciFact with the same venv, runtime and indexes; 1, 4 and 16 clients
(FastMCP's client, one session each) send single-query retriever_search calls one after another.
Variants and client counts interleaved over `--rounds` rounds, a fresh server each. Reports each
round's throughput (calls/s) and median latency, and the median over rounds of this tree's
throughput over the baseline's. Writes a section of bench/LEAN.md.

    git worktree add /tmp/base <commit>
    .venv/bin/python bench/http_load.py --baseline /tmp/base [--calls 240] [--clients 1 4 16] [--rounds 3]
        [--runtime openvino] [--server-python .cache/lean-venv/bin/python]

Uses bench/startup.py's indexes of the runtime (bench/out/startup/<runtime>/; made there if absent).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from report import ROOT, scifact_queries, write_section
from retriever.testing.net import free_port, wait_http
from startup import build, sets

LOG = ROOT / "bench" / "out" / "http_load.log"  # the last server's stderr


def start(server_bin: Path, runtime: str, tree: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    """`retriever serve --transport http --init` of `tree`'s code (None: this tree's), on loopback."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if tree is not None:  # ahead of the editable install's path entry (a plain path in its .pth)
        env["PYTHONPATH"] = str(tree / "servers")
    port = free_port()
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("w") as log:
        proc = subprocess.Popen([str(server_bin / "retriever"), "--log-level", "WARNING", "serve", "--transport",
                                 "http", "--host", "127.0.0.1", "--port", str(port), "--init", "--tools", "full",
                                 *sets(runtime)], cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/mcp"
    wait_http(url, proc, lambda: LOG.read_text()[-3000:], timeout=180, any_status=True)
    return proc, url


async def load(url: str, queries: list[str], clients: int) -> dict[str, float]:
    """`clients` sessions share `queries` (one call each, a query per call, in turn): calls/s over
    the whole run and the median call latency."""
    from fastmcp import Client

    async def one(share: list[str], lat: list[float]) -> None:
        async with Client(url, timeout=120) as c:
            await c.call_tool("retriever_search", {"query_list": [share[0]], "top_k": 10})  # warm the session
            warmed.append(True)
            if len(warmed) == clients:
                ready.set()
            await ready.wait()
            for q in share:
                t = time.perf_counter()
                r = await c.call_tool("retriever_search", {"query_list": [q], "top_k": 10})
                lat.append(time.perf_counter() - t)
                assert not r.is_error, r

    ready, warmed = asyncio.Event(), list[bool]()
    lat: list[float] = []
    tasks = [asyncio.create_task(one(queries[i::clients], lat)) for i in range(clients)]
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)  # a client that failed to warm ends it
    for task in tasks:
        if task.done() and task.exception() is not None:
            waiting.cancel()
            raise task.exception()  # type: ignore[misc]
    await waiting  # every session open and warm: the clock starts
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    return {"calls_s": len(lat) / wall, "median_ms": statistics.median(lat) * 1000}


def venv(server_bin: Path) -> str:
    try:
        return str(server_bin.parent.relative_to(ROOT))
    except ValueError:
        return str(server_bin.parent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="a tree (git worktree) of the code to compare with")
    ap.add_argument("--calls", type=int, default=240, help="calls per run, shared by the clients")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", default="openvino")
    ap.add_argument("--server-python", type=Path, default=Path(sys.executable))
    ap.add_argument("--section", default="MCP over HTTP, concurrent clients")
    args = ap.parse_args()
    server_bin = args.server_python.absolute().parent  # the venv's bin, not the interpreter it links to
    build(args.runtime)
    queries = scifact_queries(args.calls)
    base_commit = subprocess.run(["git", "-C", str(args.baseline), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    head_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    variants: dict[str, Path | None] = {head_commit: None, base_commit: args.baseline}
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for clients in args.clients:
            for name in order:
                proc, url = start(server_bin, args.runtime, variants[name])
                try:
                    res = asyncio.run(load(url, queries, clients))
                finally:
                    proc.terminate()
                    proc.wait(30)
                runs.setdefault((name, clients), []).append(res)
                print(f"round {r + 1} {name} {clients} clients: {res['calls_s']:.1f} calls/s, "
                      f"median {res['median_ms']:.2f} ms", file=sys.stderr)
    write(args, head_commit, base_commit, runs, server_bin)


def write(args: argparse.Namespace, head: str, base: str, runs: dict[tuple[str, int], list[dict[str, float]]],
          server_bin: Path) -> None:
    def rounds(name: str, clients: int, key: str, fmt: str) -> str:
        return " / ".join(format(x[key], fmt) for x in runs[(name, clients)])

    between = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--count", f"{base}..{head}"], capture_output=True,
                             text=True, check=False).stdout.strip() or "?"
    lines = [f"`{' '.join(['.venv/bin/python bench/http_load.py', *sys.argv[1:]])}`: this tree ({head}) against "
             f"{base}, the whole trees ({between} commits between them); runtime {args.runtime}, servers from "
             f"`{venv(server_bin)}`; {args.calls} SciFact queries a run, shared by the clients, one query a call "
             f"(retriever_search, top_k 10); a fresh server a run; "
             f"{args.rounds} rounds, the variants' order alternating.", "",
             f"| clients | calls/s, {head} (rounds) | calls/s, {base} (rounds) | {head} / {base}, median of rounds (their range) "
             f"| median latency ms, {head} | median latency ms, {base} |", "| --- | --- | --- | --- | --- | --- |"]
    for clients in args.clients:
        ratios = [h["calls_s"] / b["calls_s"] for h, b in zip(runs[(head, clients)], runs[(base, clients)])]
        lines.append(f"| {clients} | {rounds(head, clients, 'calls_s', '.1f')} | {rounds(base, clients, 'calls_s', '.1f')} "
                     f"| **{statistics.median(ratios):.2f}x** ({min(ratios):.2f}..{max(ratios):.2f}) "
                     f"| {rounds(head, clients, 'median_ms', '.2f')} "
                     f"| {rounds(base, clients, 'median_ms', '.2f')} |")
    body = "\n".join(lines)
    print(body)
    write_section(args.section, f"## {args.section}\n\n{body}", ROOT / "bench" / "LEAN.md")


if __name__ == "__main__":
    main()
