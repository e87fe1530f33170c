"""The command-line face over the engine: `retriever index | search | add | delete | eval | compare`
(main.py parses the command line and starts the other faces); every command takes --config."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from .errors import RetrieverError

log = logging.getLogger("retriever")


def parse_sets(items: list[str]) -> dict[str, Any]:
    """`--set a.b=value` pairs -> a nested dict; values are read as YAML (numbers, booleans...)."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise RetrieverError(f"--set expects KEY=VALUE, got {item!r}")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return out


def _sets(args: argparse.Namespace) -> dict[str, Any]:
    """The --set overrides, checked on their own first: a typo there is blamed on --set."""
    from .config import validate_config

    sets = parse_sets(args.set)
    if sets:
        validate_config(sets, source="--set", base_dir=args.config.resolve().parent)
    return sets


def _retriever(args: argparse.Namespace) -> Any:
    from .config import load_config
    from .engine.retriever import Retriever

    return Retriever(load_config(args.config, _sets(args)), args.config.resolve().parent)


NO_INDEX = "build the indexes first: `retriever index` (with the same --config and --set)"


def _engine(args: argparse.Namespace, **overrides: Any) -> Any:
    engine = _retriever(args)
    engine.init(**overrides)
    return engine


def _ultrarag_engine(args: argparse.Namespace) -> Any:
    """The engine of `serve --ultrarag`: UltraRAG's meanings (pipeline/ultrarag.py)."""
    from .api.ultrarag import ultrarag_overrides
    from .config import deep_merge, load_config
    from .engine.retriever import Retriever

    cwd, sets = Path.cwd(), _sets(args)
    given = load_config(args.config, sets, base_dir=cwd)  # read once; --set stays over UltraRAG's meanings
    overrides = ultrarag_overrides(cwd, given.index_backend, given.security.allowed_paths)
    engine = Retriever(given.with_overrides(deep_merge(overrides, sets), cwd), cwd)
    engine.ultrarag = True
    return engine


def cmd_index(args: argparse.Namespace) -> int:
    """Headless build: embeddings, dense index and BM25 index, and the learned-sparse index where
    the YAML names a sparse model (`all`) or where asked (`sparse`); rebuilds what is stale or
    missing."""
    # a stale index is skipped (with a warning), then rebuilt; BM25 or sparse alone loads no embedding model
    engine = _engine(args, overwrite=True, **({"backend": "bm25"} if args.mode in ("bm25", "sparse") else {}))
    report: dict[str, Any] = {}
    if args.mode in ("all", "dense") and (args.overwrite or engine.dense is None):
        t = time.perf_counter()
        if args.overwrite or not engine.embeddings_valid():
            report["embed"] = engine.embed(overwrite=True)
        report["index"] = engine.index(overwrite=True)
        report["dense_seconds"] = round(time.perf_counter() - t, 2)
    if args.mode in ("all", "bm25") and (args.overwrite or engine.bm25 is None):
        t = time.perf_counter()
        report["bm25"] = engine.bm25_index(overwrite=True)
        report["bm25_seconds"] = round(time.perf_counter() - t, 2)
    sparse = args.mode == "sparse" or (args.mode == "all" and engine.config.sparse.model_name_or_path)
    if sparse and (args.overwrite or not _sparse_current(engine)):
        t = time.perf_counter()
        report["sparse"] = engine.sparse_index(overwrite=True)
        report["sparse_seconds"] = round(time.perf_counter() - t, 2)
    report["status"] = engine.status()
    print(json.dumps(report, indent=2))
    return 0


def _sparse_current(engine: Any) -> bool:
    """Whether the sparse index exists and matches this session (rows added since are encoded and
    published on the way)."""
    from .errors import IndexMismatchError, IndexMissingError
    from .search.learned_sparse import index_for

    try:
        index_for(engine.session)
    except (IndexMissingError, IndexMismatchError) as e:
        log.info("sparse index: %s; building it", str(e).partition(";")[0])
        return False
    return True


def _request(mode: str, queries: list[str], k: int, filters: dict[str, Any] | None = None) -> Any:
    """The API request of a search `mode` (the same models the tools take), whole: no reply budget."""
    from .api import models

    return models.SEARCH_REQUESTS[mode](query_list=queries, top_k=k, filters=filters, return_metadata=True, max_bytes=0)


def _search(engine: Any, mode: str, queries: list[str], k: int, filters: dict[str, Any] | None = None) -> dict:
    from .api.calls import search  # every mode's request (sparse has no tool of its own to look up)

    return search(engine, _request(mode, queries, k, filters))


def _filters(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise RetrieverError(f"--filters is not valid JSON: {e}") from None


def cmd_search(args: argparse.Namespace) -> int:
    from .errors import IndexMissingError

    filters = _filters(args.filters)
    engine = _engine(args, **({"backend": "bm25"} if args.mode in ("bm25", "sparse") else {}))  # loads no model
    args.mode = args.mode or engine.default_mode()  # none named: hybrid where the collection answers it
    try:
        out = _search(engine, args.mode, [args.text], args.k, filters)
    except IndexMissingError as e:
        raise IndexMissingError(f"{str(e).partition(';')[0]}; {NO_INDEX}") from None
    if not out["ret_ids"][0]:
        print(f"retriever search: no hits for {args.text!r} (mode {args.mode})", file=sys.stderr)
        if args.json:
            print("[]")
        return 1
    hits = list(zip(out["ret_ids"][0], out["ret_scores"][0], out["ret_psg"][0], out["ret_meta"][0]))
    if args.json:
        print(json.dumps([{"id": i, "score": sc, "text": t, "metadata": m} for i, sc, t, m in hits],
                         ensure_ascii=False))
        return 0
    for rank, (doc_id, score, text, _) in enumerate(hits, start=1):
        text = text if len(text) <= 160 else text[:157] + "..."
        print(f"{rank:>3}. [{doc_id}] {score:.4f}  {text}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Add (upsert) the records of a JSONL file, a batch at a time; each batch is one change."""
    from .store.corpus import iter_lines

    if not args.file.is_file():
        raise RetrieverError(f"no file {args.file} (a JSONL file of documents)")
    engine = _engine(args)
    report = {"added": 0, "replaced": 0}
    batch: list[dict[str, Any]] = []

    chunking = engine.config.chunking
    if chunking.by != "none":
        report.update(chunks=0, removed=0)

    def flush() -> None:
        records = _chunked(engine, batch) if chunking.by != "none" else batch
        step = engine.config.limits.max_documents
        for first in range(0, len(records), step):
            out = engine.add(records[first : first + step])
            report["added"] += out["added"]
            report["replaced"] += out["replaced"]
            report["documents"] = out["documents"]
        if chunking.by != "none":  # a document's chunks from a longer earlier version go
            report["chunks"] += len(records)
            stale = {"operator": "AND", "conditions": [
                {"field": "meta.source_id", "operator": "in", "value": sorted({r["source_id"] for r in records})},
                {"field": "id", "operator": "not in", "value": [r["id"] for r in records]}]}
            out = engine.delete(None, stale)
            report["removed"] += out["deleted"]
            report["documents"] = out["documents"]
        batch.clear()

    for lineno, _, line in iter_lines(args.file):
        try:
            batch.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise RetrieverError(f"{args.file}:{lineno}: invalid JSON ({e.msg})") from None
        if len(batch) >= args.batch:
            flush()
    if batch:
        flush()
    print(json.dumps(report))
    return 0


def _sources(args: argparse.Namespace) -> tuple[dict[str, list[Any]], Any]:
    """The sources to sync, by collection: the folders named on the command line, or the YAML's."""
    from .config import SourceConfig, check_sources

    cfg = _retriever(args).base_config
    default = args.collection if args.collection is not None else cfg.collection_name
    if args.paths:
        missing = [str(p) for p in args.paths if not p.is_dir()]
        if missing:
            raise RetrieverError(f"not a folder: {', '.join(missing)}")
        known = {s.path.resolve(): s for s in cfg.sources}  # a folder the YAML lists is synced as it says
        # any other: its files' ids start with the folder's name, however many folders are named with it
        sources = [known.get(p.resolve()) or SourceConfig(path=p.resolve(), name=p.resolve().name, collection=default)
                   for p in args.paths]
        # a source's name says which files of its collection are its own: two folders under one name would
        # each delete the other's files, so the named folders may not share one with each other or the YAML's
        try:
            check_sources(sources + [s for s in cfg.sources if s not in sources], cfg.collection_name)
        except ValueError as e:
            raise RetrieverError(f"{e}. List the folder under `sources:` in parameter.yaml with a `name` of its "
                                 "own, or sync it into another collection (--collection)") from None
    else:
        sources = cfg.sources
    if not sources:
        raise RetrieverError(f"nothing to {args.command}: name folders (retriever {args.command} PATH ...) or list "
                             "them under `sources:` in parameter.yaml")
    groups: dict[str, list[Any]] = {}
    for source in sources:
        groups.setdefault(source.collection or default, []).append(source)
    return groups, cfg


def _opened(args: argparse.Namespace, collection: str) -> Any:
    engine = _retriever(args)
    engine.init(collection_name=collection)
    return engine


def cmd_sync(args: argparse.Namespace) -> int:
    """Folders in step with their collections (engine/sync.py): the YAML's `sources`, or the
    folders named on the command line. A JSON summary on stdout, progress on stderr; exit 0
    unless nothing could be done (every file that needed work failed)."""
    groups, _ = _sources(args)
    reports = [_opened(args, name).sync(group, progress=_Progress("sync")) for name, group in groups.items()]
    print(json.dumps(reports[0] if len(reports) == 1 else {"collections": reports}, indent=2))
    worked = sum(r["files"] - r["failed"] for r in reports)
    return 2 if worked == 0 and any(r["failed"] for r in reports) else 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Sync, then keep syncing as files change (watchfiles: the OS's file events, debounced):
    each sync's summary is one JSON line on stdout. Ctrl-C (or SIGTERM) stops it between syncs."""
    try:
        import watchfiles
    except ImportError as e:
        raise RetrieverError("retriever watch needs watchfiles: pip install 'mcp-retriever[watch]'") from e
    import signal
    import threading

    groups, _ = _sources(args)
    engines = {name: _opened(args, name) for name in groups}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def sync(name: str, sources: list[Any]) -> None:
        report = engines[name].sync(sources, progress=_Progress("watch"))
        print(json.dumps({k: v for k, v in report.items() if k != "seconds"}), flush=True)

    for name, group in groups.items():
        sync(name, group)
    roots = {str(s.path.resolve()): (name, s) for name, group in groups.items() for s in group}
    log.info("watching %d folder(s); debounce %.1f s", len(roots), args.debounce)
    try:
        for changed in watchfiles.watch(*roots, debounce=int(args.debounce * 1000), stop_event=stop, rust_timeout=500,
                                        raise_interrupt=False):
            touched: dict[str, list[Any]] = {}
            for _, path in changed:
                for root, (name, source) in roots.items():
                    if (path == root or path.startswith(root + "/")) and source not in touched.get(name, []):
                        touched.setdefault(name, []).append(source)
            for name, sources in touched.items():
                try:
                    sync(name, sources)
                except RetrieverError as e:  # a source folder gone, a limit: said, and the watch goes on
                    log.error("watch: %s", e)
    except KeyboardInterrupt:
        pass
    return 0


class _Progress:
    """A line on stderr at most once a second, and at the end: files done, their rate, the file."""

    def __init__(self, what: str) -> None:
        self.what, self.start, self.last = what, time.monotonic(), 0.0

    def __call__(self, done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - self.last >= 1.0 or done == total:
            self.last = now
            rate = done / max(now - self.start, 1e-9)
            print(f"{self.what}: {done}/{total} files ({rate:.1f}/s) {name}", file=sys.stderr, flush=True)


def _chunked(engine: Any, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records cut as the YAML's `chunking` says: `<id>:<n>`, each with its offsets."""
    from .documents.pieces import pieces_for
    from .documents.split import chunk_records, chunks_of
    from .store.collection import parse_documents

    limit = engine.config.limits.max_chunks
    cut = engine.config.chunking
    pieces = pieces_for(engine.config, cut)
    out: list[dict[str, Any]] = []
    for doc in parse_documents(batch):
        chunks = chunks_of(doc.text, cut, limit, pieces)
        if len(chunks) > limit:
            raise RetrieverError(f"document {doc.id!r}: more than limits.max_chunks ({limit}) chunks; nothing of this "
                                 "batch was added; raise it or set a larger chunking.length")
        out += chunk_records({**doc.metadata}, doc.text, chunks, doc.id)
    return out


def cmd_delete(args: argparse.Namespace) -> int:
    engine = _engine(args)
    print(json.dumps(engine.delete(args.ids or None, _filters(args.filters))))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .search.evaluation import evaluate, load_qrels, load_queries, read_trec_run, write_trec_run

    qrels = load_qrels(args.qrels)
    if args.run is not None:  # a run file made elsewhere: measured, nothing searched
        _print_metrics({"run": str(args.run), **evaluate(read_trec_run(args.run), qrels)}, args.json)
        return 0
    if args.queries is None:
        raise RetrieverError("retriever eval needs --queries (to search) or --run (a TREC run file to measure)")
    engine = _engine(args)
    queries = load_queries(args.queries)
    missing = [q for q in qrels if q not in queries]
    if missing:
        raise RetrieverError(f"{len(missing)} qrels queries are not in {args.queries} (first: {missing[0]})")
    qids = list(qrels)
    t = time.perf_counter()
    out = _search(engine, args.mode, [queries[q] for q in qids], args.k)
    seconds = time.perf_counter() - t
    run = {q: list(zip(ids, scores)) for q, ids, scores in zip(qids, out["ret_ids"], out["ret_scores"])}
    metrics = {"mode": args.mode, **evaluate(run, qrels), "search_seconds": round(seconds, 2)}
    if args.run_file:
        write_trec_run(run, args.run_file, f"retriever-{args.mode}")
    _print_metrics(metrics, args.json)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from .search.evaluation import compare, load_qrels, read_trec_run

    result = compare(read_trec_run(args.run_a), read_trec_run(args.run_b), load_qrels(args.qrels), args.measure,
                     args.permutations, args.seed)
    _print_metrics({"run_a": str(args.run_a), "run_b": str(args.run_b), **result}, args.json)
    return 0


def _print_metrics(metrics: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(metrics))
    else:
        for key, value in metrics.items():
            print(f"{key:>16}  {value}")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


