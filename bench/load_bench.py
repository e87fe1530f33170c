"""Load on `retriever deploy` (issue 11): 1, 4, 16 and 64 concurrent clients, each sending single
SciFact queries (dense, BM25, hybrid) one after another, against one in-process batched search of
the same queries in the same run. Writes its section of bench/RESULTS.md.

    .venv/bin/python bench/load_bench.py [--queries 300] [--clients 1 4 16 64] [--top-k 10]

Needs the SciFact indexes (`make eval-scifact` builds them under index/scifact; this runs
`retriever index` on the same paths first, which skips what is up to date).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from report import ROOT, SCIFACT, scifact_queries, write_section
from retriever.testing.net import free_port, wait_http

BIN = Path(sys.executable).parent
OUT = ROOT / "index" / "scifact"
SETS = [f"corpus_path={SCIFACT / 'corpus.jsonl'}", f"embedding_path={OUT / 'embedding.npy'}",
        f"index_backend_configs.faiss.index_path={OUT / 'faiss'}", f"backend_configs.bm25.save_path={OUT / 'bm25'}"]
MODES = ("dense", "bm25", "hybrid")


def cli(*args: str, sets: list[str] = SETS) -> list[str]:
    return [str(BIN / "retriever"), "--log-level", "WARNING", *args, "--config", str(ROOT / "parameter.yaml"),
            *[a for s in sets for a in ("--set", s)]]


class PeakRSS:
    """The largest resident set of a process (and its children), sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.proc, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                rss = sum(p.memory_info().rss for p in [self.proc, *self.proc.children(recursive=True)])
            except psutil.Error:
                return
            self.peak = max(self.peak, rss)

    def reset(self) -> None:
        self.peak = 0


async def load(port: int, queries: list[str], clients: int, mode: str, k: int) -> dict[str, Any]:
    """`clients` keep-alive connections sharing one list of queries; each sends its next query
    when its last reply came. The client is raw asyncio streams with the requests made up front:
    it shares the cores with the service, so it must cost little (httpx costs several times more
    CPU per request). Its own CPU share is reported."""
    pending = iter([json.dumps({"query_list": [q], "top_k": k, "mode": mode}).encode() for q in queries])
    latencies: list[float] = []
    errors = 0

    async def client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for body in pending:
            t = time.perf_counter()
            writer.write(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body))
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            reply = await reader.readexactly(length)
            latencies.append(time.perf_counter() - t)
            if status != 200 or len(json.loads(reply)["ret_psg"][0]) != k:
                errors += 1
        writer.close()

    cpu, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=20)
    return {"qps": len(latencies) / wall, "p50": statistics.median(latencies), "p95": cuts[18], "errors": errors,
            "p75": cuts[14], "p90": cuts[17], "max": max(latencies),
            "client_cpu": (time.process_time() - cpu) / wall}


def batch_metrics(url: str) -> tuple[float, float, float]:
    """Queries in batches, batches, and seconds the compute side spent on them, so far."""
    text = httpx.get(f"{url}/metrics").text
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if not line.startswith("#")}
    return (values.get("retriever_batch_queries_sum", 0.0), values.get("retriever_batch_queries_count", 0.0),
            values.get("retriever_batch_seconds_sum", 0.0))


def in_process(queries: list[str], k: int, runs: int, modes: list[str]) -> dict[str, float]:
    """Queries per second of one batched call of all `queries`, per mode (median of `runs`)."""
    from retriever.api import call
    from retriever.api.models import DeploySearchRequest
    from retriever.cli import parse_sets
    from retriever.config import load_config
    from retriever.engine.retriever import Retriever

    engine = Retriever(load_config(ROOT / "parameter.yaml", parse_sets(SETS)), ROOT)
    engine.init()
    out = {}
    for mode in modes:
        request = DeploySearchRequest(query_list=queries, top_k=k, mode=mode, max_bytes=0).as_search()
        call(engine, request)  # warm
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            call(engine, request)
            times.append(time.perf_counter() - t)
        out[mode] = len(queries) / statistics.median(times)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3, help="times each query is sent per row")
    p.add_argument("--runs", type=int, default=3, help="runs of the in-process batch")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--set", action="append", default=[], help="a YAML override for the service, e.g. "
                   "deploy.max_wait_ms=0 (the report is then printed, not written)")
    a = p.parse_args()
    subprocess.run(cli("index"), check=True, stdout=subprocess.DEVNULL)
    queries = scifact_queries(a.queries)
    measured = queries * a.rounds
    batch = in_process(queries, a.top_k, a.runs, a.modes)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(cli("deploy", "--port", str(port), sets=SETS + a.set), stderr=subprocess.DEVNULL,
                              env={**os.environ, "RETRIEVER_HTTP_TOKENS": ""})
    rows = []
    try:
        wait_http(f"{url}/readyz", server, lambda: "(its stderr is not kept)")
        rss = PeakRSS(server.pid)
        for mode in a.modes:
            one_p50 = None
            for clients in a.clients:
                asyncio.run(load(port, queries[: 4 * clients], clients, mode, a.top_k))  # warm-up, not measured
                rss.reset()
                s0, c0, b0 = batch_metrics(url)
                t0 = time.perf_counter()
                r = asyncio.run(load(port, measured, clients, mode, a.top_k))
                s1, c1, b1 = batch_metrics(url)
                busy = (b1 - b0) / (time.perf_counter() - t0)
                one_p50 = one_p50 or r["p50"]
                rows.append(f"| {mode} | {clients} | {r['qps']:.0f} | {r['qps'] / batch[mode]:.2f} | "
                            f"{r['p50'] * 1000:.1f} | {r['p95'] * 1000:.1f} | {r['p95'] / one_p50:.1f}x | "
                            f"{(s1 - s0) / max(c1 - c0, 1):.1f} | {r['errors']} | {rss.peak / 2**20:.0f} | "
                            f"{r['client_cpu'] * 100:.0f}% | {busy * 100:.0f}% |")
                print(rows[-1], file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(30)
    body = "\n".join([
        "## Deployed service under load (`bench/load_bench.py`, issue 11)", "",
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, in one run: `retriever deploy` on SciFact "
        f"(5,183 passages), {len(queries)} test queries sent {a.rounds} times per row after a warm-up, "
        f"top_k {a.top_k}, each client a keep-alive "
        "connection sending one query per request and the next when the reply came (raw asyncio streams in one "
        "process on the same cores: client CPU is its share of one core). Compute busy: the share of the row's "
        "time the service's compute side spent on batches. The batch column is the throughput "
        "against one in-process batched call of the same queries (`api.call`, same mode): "
        + ", ".join(f"{m} {batch[m]:.0f} q/s" for m in a.modes) + ". Mean batch: queries searched together.", "",
        "| mode | clients | q/s | of in-process batch | p50 ms | p95 ms | p95 / 1-client p50 | mean batch | errors "
        "| peak RSS MiB | client CPU | compute busy |", "|---|---|---|---|---|---|---|---|---|---|---|---|", *rows])
    if not a.set:
        write_section("load_bench", body)
    print(body)


if __name__ == "__main__":
    main()
