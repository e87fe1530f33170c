"""Where one call's time goes, step by step: our stdio server (the agent's `search`) and the deploy
service's POST /search against the busy do-nothing servers of bench/call_overhead.py (the same reply
bytes, after the raw library calls), each process marking its steps with time.perf_counter
(CLOCK_MONOTONIC: one clock for every process here, so a server's marks fall between its client's).
Medians per step; ours less the do-nothing server's. Writes its section of bench/LEAN.md.

    .venv/bin/python bench/call_spans.py [--docs 1000] [--queries 300]

The bare JSON-RPC client over stdio, one httpx client with keep-alive over HTTP; the two servers of
a transport called in turn, query by query, kinds alternating. Ours is `retriever` itself with its
functions wrapped before it starts (MARKS below): the marks cost a few microseconds each, in ours
and in the do-nothing servers alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from call_overhead import (
    HTTP,
    KINDS,
    OUT,
    STDIO,
    Bare,
    Procs,
    arguments,
    cpu_flags,
    deploy,
    do_nothing,
    http_body,
    key,
    project,
    raw_settings,
    record,
)
from report import ROOT, scifact_queries, write_section
from retriever.testing.net import free_port, wait_http

COMMON = r"""
import atexit, functools, json, os, signal, sys, time
from starlette.applications import Starlette
pc = time.perf_counter
MARKS = []
atexit.register(lambda: open(os.environ["CALL_SPANS"], "w").write(json.dumps(MARKS)))
# uvicorn, stopped, raises SIGTERM again with the handler it found: this one, so the marks get written
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

def marked(owner, attr, before, after=None):
    fn = getattr(owner, attr)
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        MARKS.append((before, pc()))
        try:
            return fn(*args, **kwargs)
        finally:
            after and MARKS.append((after, pc()))
    setattr(owner, attr, wrapper)

def amarked(owner, attr, before, after):
    fn = getattr(owner, attr)
    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        MARKS.append((before, pc()))
        try:
            return await fn(*args, **kwargs)
        finally:
            MARKS.append((after, pc()))
    setattr(owner, attr, wrapper)

_app = Starlette.__call__
async def _marked_app(self, scope, receive, send):  # its arguments named: uvicorn takes a bare (*args) for a factory
    if scope["type"] != "http":
        return await _app(self, scope, receive, send)
    MARKS.append(("app", pc()))
    try:
        return await _app(self, scope, receive, send)
    finally:
        MARKS.append(("app_end", pc()))
Starlette.__call__ = _marked_app
"""

OURS = COMMON + r"""
from retriever.api import calls
from retriever.embedders import exported
from retriever.mcp import stdio
from retriever.mcp.core import Gate
from retriever.service import app as service, batcher
marked(stdio.Lines, "feed", "read")
marked(Gate, "request_now", "validate", "validated")
marked(calls, "hits", "work", "work_end")
marked(exported.OpenVinoSession, "__call__", "infer", "infer_end")
marked(exported.OnnxSession, "__call__", "infer", "infer_end")
marked(stdio.StdioServer, "write", "send")
amarked(service, "_request", "body", "validated")
marked(batcher.Batcher, "now", "submit")  # a lone quick search: served there; else queued
marked(batcher.Batcher, "submit", "submit")
marked(batcher.Batcher, "_serve", "serve", "served")
marked(batcher, "_settle", "settle")
marked(service, "_json_reply", "render", "rendered")
import sys
from retriever.main import main
sys.exit(main())
"""

BUSY = COMMON + r"""
if "run" in globals():  # the raw encoder's runtime call
    _run = run
    def run(feeds):
        MARKS.append(("infer", pc()))
        try:
            return _run(feeds)
        finally:
            MARKS.append(("infer_end", pc()))
def _work(fn):
    def work(query):
        MARKS.append(("work", pc()))
        fn(query)
        MARKS.append(("work_end", pc()))
    return work
WORK = {kind: _work(fn) for kind, fn in WORK.items()}
_read, _write = os.read, os.write
def _marked_read(fd, n):
    data = _read(fd, n)
    MARKS.append(("read", pc()))
    return data
def _marked_write(fd, data):
    MARKS.append(("send", pc()))
    return _write(fd, data)
os.read, os.write = _marked_read, _marked_write
"""

# the steps of a call: (label, from mark, to mark); "sent" and "got" are the client's
STEPS = {
    "stdio": [("the client's write to the server's read", "sent", "read"),
              ("read to the work", "read", "work"),
              ("  of it: read to the arguments validated", "read", "validated"),
              ("  of it: validated to the work (grants, the quick check: mcp/serving.py serve_here)", "validated", "work"),
              ("the work (the search)", "work", "work_end"),
              ("  of it: to the encoder's run (tokenizing)", "work", "infer"),
              ("  of it: the encoder's run", "infer", "infer_end"),
              ("  of it: the index search and hits", "infer_end", "work_end"),
              ("the work to the answer's write", "work_end", "send"),
              ("the answer's write to the client's return", "send", "got"),
              ("whole", "sent", "got")],
    "http": [("the client's send to the app", "sent", "app"),
             ("the app to the work", "app", "work"),
             ("  of it: the body read and validated", "app", "validated"),
             ("  of it: validated to the batcher (grants, the search spec)", "validated", "submit"),
             ("  of it: the batcher to its serve (at once, or queued)", "submit", "serve"),
             ("  of it: its serve to the work", "serve", "work"),
             ("the work (the search)", "work", "work_end"),
             ("  of it: to the encoder's run (tokenizing, the compute thread)", "work", "infer"),
             ("  of it: the encoder's run", "infer", "infer_end"),
             ("  of it: the index search and hits", "infer_end", "work_end"),
             ("the work to the app's end (the reply sent)", "work_end", "app_end"),
             ("  of it: the work to the reply's JSON", "work_end", "render"),
             ("  of it: the reply's JSON", "render", "rendered"),
             ("  of it: the JSON to the app's end", "rendered", "app_end"),
             ("the app's end to the client's return", "app_end", "got"),
             ("whole", "sent", "got")],
}
ENDS = ("validated", "work_end", "infer_end", "served", "rendered", "app_end")  # marks taken at their last


def steps(calls: list[tuple[str, float, float]], marks: list[tuple[str, float]], kind: str,
          transport: str) -> dict[str, list[float]]:
    """Per step, its ms in each call of `kind` (marks between a call's start and the next's)."""
    out: dict[str, list[float]] = {}
    starts = [c[1] for c in calls[1:]] + [float("inf")]
    for (k, sent, got), following in zip(calls, starts):
        if k != kind:
            continue
        at: dict[str, float] = {"sent": sent, "got": got}
        for name, t in marks:
            if sent <= t < following and (name in ENDS or name not in at):
                at[name] = t
        for label, a, b in STEPS[transport]:
            if a in at and b in at:
                out.setdefault(label, []).append((at[b] - at[a]) * 1000)
    return out


def stdio_spans(config: Path, table: Path, busy: list[Any], queries: list[str], procs: Procs) -> dict[str, Any]:
    env = {"ours": {**os.environ, "CALL_SPANS": str(OUT / "spans-ours-stdio.json")},
           "busy": {**os.environ, "CALL_SPANS": str(OUT / "spans-busy-stdio.json")}}
    commands = {"ours": [sys.executable, "-c", OURS, "--log-level", "WARNING", "serve", "--config", str(config)],
                "busy": do_nothing(table, busy, STDIO, marks=BUSY)}
    started = {s: procs.start(c, OUT / f"spans-{s}-stdio.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=env[s]) for s, c in commands.items()}
    clients = {s: Bare(p) for s, p in started.items()}
    calls: dict[str, list[tuple[str, float, float]]] = {s: [] for s in clients}
    for i, q in enumerate([*queries[:5], *queries]):
        for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
            for s in ("ours", "busy") if i % 2 == 0 else ("busy", "ours"):
                t = time.perf_counter()
                clients[s].call(arguments(kind, q))
                if i >= 5:
                    calls[s].append((kind, t, time.perf_counter()))
    for p in started.values():
        procs.stop(p)  # stdin closed: each writes its marks as it exits
    return {s: json.loads(Path(env[s]["CALL_SPANS"]).read_text()) for s in clients} | {"calls": calls}


def http_spans(config: Path, table: Path, busy: list[Any], queries: list[str], procs: Procs) -> dict[str, Any]:
    marks = {s: OUT / f"spans-{s}-http.json" for s in ("ours", "busy")}
    port = free_port()
    log = OUT / "spans-busy-http.log"
    other = procs.start(do_nothing(table, busy, HTTP, port, marks=BUSY), log,
                        env={**os.environ, "CALL_SPANS": str(marks["busy"])})
    wait_http(f"http://127.0.0.1:{port}/readyz", other, lambda: log.read_text()[-2000:])
    calls: dict[str, list[tuple[str, float, float]]] = {"ours": [], "busy": []}
    with deploy(config, procs, [sys.executable, "-c", OURS], {"CALL_SPANS": str(marks["ours"])}) as url, \
            httpx.Client(timeout=60) as client:
        urls = {"ours": url, "busy": f"http://127.0.0.1:{port}"}
        for i, q in enumerate([*queries[:5], *queries]):
            for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
                for s in ("ours", "busy") if i % 2 == 0 else ("busy", "ours"):
                    t = time.perf_counter()
                    client.post(f"{urls[s]}/search", content=key(http_body(kind, q)),
                                headers={"content-type": "application/json"}).read()
                    if i >= 5:
                        calls[s].append((kind, t, time.perf_counter()))
    procs.stop(other)  # uvicorn stops on SIGTERM: each writes its marks as it exits
    return {s: json.loads(path.read_text()) for s, path in marks.items()} | {"calls": calls}


def table_lines(transport: str, spans: dict[str, Any]) -> list[str]:
    lines = [f"| {transport}: step | " + " | ".join(f"{k}: ours | busy | ours less busy" for k in KINDS) + " |",
             "| --- |" + " --- | --- | --- |" * len(KINDS)]
    got = {(s, k): steps(spans["calls"][s], spans[s], k, transport) for s in ("ours", "busy") for k in KINDS}
    for label, _, _ in STEPS[transport]:
        cells = []
        for k in KINDS:
            o, b = got["ours", k].get(label), got["busy", k].get(label)
            mo = statistics.median(o) if o else None
            mb = statistics.median(b) if b else None
            cells += [f"{mo:.3f}" if mo is not None else "", f"{mb:.3f}" if mb is not None else "",
                      f"{mo - mb:+.3f}" if mo is not None and mb is not None else ""]
        name = f"**{label}**" if label == "whole" else label
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1000, help="SciFact passages in the project")
    ap.add_argument("--queries", type=int, default=300, help="SciFact test queries, each a call per kind and server")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "LEAN.md")
    ap.add_argument("--section", default="call-spans")
    ap.add_argument("--no-write", action="store_true", help="print the section, do not write it")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    config = project(args.docs)
    queries = scifact_queries(args.queries)
    busy = raw_settings(config)
    procs = Procs()
    try:
        stdio_table, http_table, _, _ = record(config, queries, procs)
        stdio = stdio_spans(config, stdio_table, busy, queries, procs)
        http = http_spans(config, http_table, busy, queries, procs)
    finally:
        procs.stop_all()
    runtime = json.loads((config.parent / "out" / "faiss" / "manifest.json").read_text())["runtime"]
    lines = [
        f"## One call's steps, ours against a busy do-nothing server (`.venv/bin/python bench/call_spans.py"
        f"{' ' if sys.argv[1:] else ''}{' '.join(sys.argv[1:])}`, {time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"The first {args.docs:,} SciFact passages ({runtime}); CPU flags: {cpu_flags()}; {os.cpu_count()} CPUs,"
        f" shared. {args.queries} SciFact test queries per kind and server (5 before, not counted); medians in ms"
        " of each step over the calls that have both of its marks. The do-nothing server marks its read, its raw"
        " calls (the work) and its write; ours, the functions named below (bench/call_spans.py OURS). A step's"
        " medians do not add up to the whole's.",
        "",
        *table_lines("stdio", stdio),
        "",
        *table_lines("http", http),
    ]
    body = "\n".join(lines)
    if not args.no_write:
        write_section(args.section, body, args.out)
    print(body)


if __name__ == "__main__":
    main()
