"""The program: `retriever <command>`'s parser and the composition root that starts each face
(`serve`: MCP, `deploy`: the HTTP service, `run` and `ultrarag-server`: pipelines, the rest: the
command-line face in cli.py). The faces never import each other; this module imports them all."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .errors import RetrieverError

log = logging.getLogger("retriever")


def cmd_serve(args: argparse.Namespace) -> int:
    from .cli import _retriever, _ultrarag_engine
    from .mcp.core import served_tools
    from .memory import started

    try:
        engine = _ultrarag_engine(args) if args.ultrarag else _retriever(args)
        engine.shared = args.transport == "http"  # one session serves every HTTP client
        if args.init:
            engine.init()
        profile, include, exclude = parse_tools(args.tools)
        tools = served_tools(engine, read_only=True if args.read_only else None, ultrarag=args.ultrarag,
                             profile=profile, include=include, exclude=exclude)
        started()  # garbage collection back on, start-up's objects frozen (memory.py)
    except (RetrieverError, ValueError, OSError) as e:
        if args.transport == "stdio":  # the client sees why, not only "Connection closed"; then exit 2
            from .mcp.stdin import refuse_requests

            print(f"retriever serve: error: {e}", file=sys.stderr, flush=True)
            refuse_requests(f"retriever serve: {e}")
            raise SystemExit(2) from e
        raise
    if args.transport == "stdio":
        from .mcp.stdio import serve

        serve(engine, tools)
        return 0
    from .mcp.server import build_server

    server = build_server(engine, tools=tools)
    from .security.http_guard import front_door
    from .security.http_limits import uvicorn_limits

    guard = front_door(engine.base_config, args.host, args.port)
    server.run("http", host=args.host, port=args.port, show_banner=False, middleware=[guard],
               host_origin_protection=False,  # HTTPGuard checks Host and Origin itself
               uvicorn_config={"log_config": None, "log_level": args.log_level.lower(),  # uvicorn in our format
                               **uvicorn_limits(engine.base_config)})  # header timeout, open connections
    return 0


def parse_tools(spec: str | None) -> tuple[str | None, list[str] | None, list[str] | None]:
    """`--tools full,-retriever_delete,+retriever_hybrid_search`: a profile (or none: the YAML's),
    tools to add (+) and to leave out (-). None where the YAML's tools section stands."""
    if not spec:
        return None, None, None
    profile, include, exclude = None, [], []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if part[0] == "+":
            include.append(part[1:])
        elif part[0] == "-":
            exclude.append(part[1:])
        elif profile is None:
            profile = part
        else:
            raise RetrieverError(f"--tools: one profile at most, got {profile!r} and {part!r}; name tools as +tool "
                                 "or -tool")
    return profile, include or None, exclude or None


def cmd_deploy(args: argparse.Namespace) -> int:
    """The shared HTTP service (service/): loads the indexes at start, batches searches."""
    import uvicorn

    from .memory import reuse_batch_memory
    from .security.http_limits import uvicorn_limits
    from .service import build_app

    reuse_batch_memory()
    from .cli import _retriever

    engine = _retriever(args)
    engine.shared = True  # one session serves every client
    mcp_app = None
    if args.mcp:
        from .mcp.server import build_server

        mcp_app = build_server(engine, read_only=True).http_app(path="/mcp", host_origin_protection=False)
    app = build_app(engine, args.host, args.port, mcp_app)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False,
                timeout_graceful_shutdown=5, log_config=None,  # log_config=None: uvicorn logs in our format
                **uvicorn_limits(engine.base_config))  # header timeout, open connections
    return 0


def cmd_ultrarag_server(args: argparse.Namespace) -> int:
    """A launcher UltraRAG starts as `python <folder>/src/<name>.py`, running ours with this Python."""
    import shutil

    from .api.ultrarag import MARK
    from .pipeline.ultrarag import write_launcher

    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    launcher = write_launcher(folder, sys.executable)
    existing = folder / "server.yaml"
    if existing.is_file() and not existing.read_text(encoding="utf-8", errors="replace").startswith(MARK):
        kept = existing.with_name("server.yaml.orig")
        existing.rename(kept)  # build writes ours; theirs is kept, not overwritten
        log.warning("%s was not written by mcp-retriever: kept as %s", existing, kept.name)
    params = folder / "parameter.yaml"
    if args.parameter is not None or not params.exists():
        source = args.parameter or Path(__file__).resolve().parents[2] / "parameter.yaml"
        if not source.is_file():
            raise RetrieverError(f"no parameter file at {source}; pass --parameter FILE")
        shutil.copy(source, params)
    print(json.dumps({"launcher": str(launcher), "parameter": str(params)}, indent=2))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """A YAML pipeline, headless (pipeline/): checked first, then run step by step."""
    import asyncio

    from .pipeline.runner import run_pipeline

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    result = asyncio.run(run_pipeline(args.pipeline, args.param, args.output, progress))
    print(json.dumps({"output": result["output"], "seconds": result["seconds"], "steps": len(result["steps"]),
                      "variables": sorted(result["variables"])}, indent=2))
    return 0


def _version() -> str:
    from . import package_version  # not the MCP layer's: importing it costs a second on every command

    return package_version()


def parser() -> argparse.ArgumentParser:
    from .cli import _positive, cmd_add, cmd_compare, cmd_delete, cmd_eval, cmd_index, cmd_search, cmd_sync, cmd_watch
    from .search.kinds import DEFAULT_MODE, MODES

    p = argparse.ArgumentParser(prog="retriever", description="MCP retrieval server: dense + BM25 search")
    p.add_argument("--log-level", default="INFO", help="log level on stderr (default INFO)")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        sp.add_argument("--config", type=Path, default=Path("parameter.yaml"), help="parameter.yaml to use")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a YAML key (dotted path, YAML value), e.g. --set top_k=10; repeatable; "
                        "relative paths resolve against the YAML's folder")
        return sp

    s = add("serve", "run the MCP server (stdio by default)")
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (an MCP client starts the server) or http (streamable HTTP at /mcp)")
    s.add_argument("--host", default="127.0.0.1", help="http: bind address; off loopback a bearer token is required")
    s.add_argument("--port", type=int, default=8000, help="http: port (default 8000)")
    s.add_argument("--init", action="store_true", help="call retriever_init at start-up")
    s.add_argument("--read-only", action="store_true",
                   help="serve no write tool (embed, index, bm25_index, add, delete); also security.read_only")
    s.add_argument("--ultrarag", action="store_true",
                   help="serve as UltraRAG's retriever: its build tool, paths relative to the working directory, "
                   "keys and URLs from its tool arguments, whole replies (docs/ultrarag.md)")
    s.add_argument("--tools", metavar="PROFILE[,+TOOL][,-TOOL]",
                   help="the tools to list: a profile (agent: a few tools for agents, the default; ultrarag: "
                   "UltraRAG's retriever tools; full: everything), +tool to add one, -tool to leave one out; "
                   "default: tools in parameter.yaml")
    s.set_defaults(fn=cmd_serve)

    s = sub.add_parser("ultrarag-server", help="make FOLDER an UltraRAG server folder running this retriever")
    s.add_argument("folder", type=Path, help="e.g. <UltraRAG project>/servers/retriever")
    s.add_argument("--parameter", type=Path, help="copy this parameter.yaml there (default: keep the folder's, "
                   "else copy this project's)")
    s.set_defaults(fn=cmd_ultrarag_server)

    s = add("deploy", "run the shared HTTP search service (POST /search, /tools/<tool>, /metrics, ...)")
    s.add_argument("--host", default="127.0.0.1", help="bind address; off loopback a bearer token is required")
    s.add_argument("--port", type=int, default=64501, help="port (default 64501)")
    s.add_argument("--mcp", action="store_true", help="also serve the read-only MCP tools at /mcp (streamable HTTP)")
    s.set_defaults(fn=cmd_deploy)

    s = sub.add_parser("run", help="run a YAML pipeline (UltraRAG's grammar) without UltraRAG")
    s.add_argument("pipeline", type=Path, help="the pipeline YAML (servers: and pipeline:)")
    s.add_argument("--param", type=Path, help="parameters per server alias (YAML), over each server's own")
    s.add_argument("--output", type=Path, help="result file (default: output/<pipeline>_<time>.json beside it)")
    s.set_defaults(fn=cmd_run)

    s = add("index", "embed, index and BM25-index the corpus from the YAML (headless)")
    s.add_argument("--overwrite", action="store_true", help="rebuild even what is up to date")
    s.add_argument("--mode", choices=["all", "dense", "bm25", "sparse"], default="all",
                   help="what to build (default all: sparse too where sparse.model_name_or_path is set; bm25 and "
                        "sparse load no embedding model)")
    s.set_defaults(fn=cmd_index)

    s = add("sync", "bring collections in step with folders of files: new, changed, moved and removed files")
    s.add_argument("paths", nargs="*", type=Path, help="folders to sync (default: the YAML's sources)")
    s.add_argument("--collection", help="the collection the named folders fill (default: the YAML's collection_name)")
    s.set_defaults(fn=cmd_sync)

    s = add("watch", "sync, then keep collections in step with their folders as files change (pip install "
            "'mcp-retriever[watch]')")
    s.add_argument("paths", nargs="*", type=Path, help="folders to watch (default: the YAML's sources)")
    s.add_argument("--collection", help="the collection the named folders fill (default: the YAML's collection_name)")
    s.add_argument("--debounce", type=float, default=1.0, help="seconds of quiet before a change is synced (default 1)")
    s.set_defaults(fn=cmd_watch)

    s = add("search", "search the saved indexes")
    s.add_argument("text", help="the query")
    s.add_argument("-k", type=_positive, default=10, help="hits to show (default 10)")
    s.add_argument("--mode", choices=MODES, default=None,
                   help=f"hybrid: dense + BM25 fused (the best ranking); dense; bm25 (loads no embedding model); "
                        f"default {DEFAULT_MODE} where the collection has both indexes, else the one it has "
                        "(as the library and the deploy service)")
    s.add_argument("--filters", help='a filter as JSON, e.g. \'{"field": "meta.year", "operator": ">=", "value": 2020}\'')
    s.add_argument("--json", action="store_true", help="the hits as JSON on stdout")
    s.set_defaults(fn=cmd_search)

    s = add("add", "add (upsert) documents from a JSONL file to the selected collection")
    s.add_argument("file", type=Path, help='JSONL: {"id", "contents", ...metadata} or BEIR {"_id", "title", "text"}')
    s.add_argument("--batch", type=int, default=256, help="documents per change (default 256)")
    s.set_defaults(fn=cmd_add)

    s = add("delete", "delete documents by id and/or filter from the selected collection")
    s.add_argument("ids", nargs="*", help="ids of the documents to delete")
    s.add_argument("--filters", help="and/or the documents a filter keeps, as JSON (the search tools' language)")
    s.set_defaults(fn=cmd_delete)

    s = add("eval", "nDCG@10, Recall@100, MRR@10 over BEIR queries and qrels (or of a TREC run file: --run)")
    s.add_argument("--queries", type=Path, help="BEIR queries to search (or give --run)")
    s.add_argument("--qrels", type=Path, required=True, help="BEIR qrels: TSV query-id, corpus-id, score, with a header")
    s.add_argument("--run", type=Path, help="measure this TREC run file instead of searching")
    s.add_argument("--mode", choices=MODES, default="dense",
                   help="hybrid uses the YAML's hybrid section (fusion, rrf_k, vector_weight, candidate_depth)")
    s.add_argument("-k", type=_positive, default=100, help="depth of the run (default 100)")
    s.add_argument("--json", action="store_true", help="the metrics as JSON")
    s.add_argument("--run-file", type=Path, help="write a TREC run file here")
    s.set_defaults(fn=cmd_eval)

    s = add("compare", "is run B better than run A beyond chance? paired randomisation test and t-test")
    s.add_argument("run_a", type=Path, help="TREC run file of the baseline")
    s.add_argument("run_b", type=Path, help="TREC run file of the candidate")
    s.add_argument("--qrels", type=Path, required=True, help="BEIR qrels: TSV query-id, corpus-id, score, with a header")
    s.add_argument("--measure", choices=("ndcg@10", "recall@100", "mrr@10"), default="ndcg@10",
                   help="the measure compared (default ndcg@10)")
    s.add_argument("--permutations", type=_positive, default=10_000, help="sign flips of the randomisation test")
    s.add_argument("--seed", type=int, default=0, help="seed of the randomisation test")
    s.add_argument("--json", action="store_true", help="the result as JSON")
    s.set_defaults(fn=cmd_compare)
    return p


SERVERS = ("serve", "deploy")  # long-running: malloc bounded (memory.py)


def main(argv: list[str] | None = None) -> int:
    from .memory import bound_malloc, start_up

    with start_up():  # no garbage collection while the libraries import (memory.py)
        from .logs import setup_logging

        args = parser().parse_args(argv)
        if args.command in SERVERS:  # a batch command keeps glibc's defaults: bounding costs it memory (docs/storage.md)
            bound_malloc()
        setup_logging(args.log_level)
        if args.fn is cmd_serve:  # on until the server has loaded: it calls memory.started()
            return _run(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.fn(args))
    except (RetrieverError, ValueError, OSError) as e:
        print(f"retriever {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
