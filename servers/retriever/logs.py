"""Logging for the command line: one format on stderr for every logger (stdout belongs to the
protocol on stdio); other libraries' records below WARNING only with --log-level DEBUG."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _OursOrWarnings(logging.Filter):
    """Other libraries' records (faiss's loader, bm25s, httpx, fastmcp, uvicorn...) from WARNING up;
    ours at the chosen level. Some of them set their own loggers' levels, so the root's is not enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.partition(".")[0] == "retriever"


def setup_logging(level_name: str) -> None:
    """Every log line on stderr in one format; other libraries' below WARNING only with --log-level DEBUG."""
    import os

    level = logging.getLevelName(level_name.upper())
    if not isinstance(level, int):
        raise SystemExit(f"retriever: --log-level {level_name!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    # fastmcp gives its logger a rich handler of its own (a second format) when it is imported
    os.environ.setdefault("FASTMCP_LOG_ENABLED", "false")
    fastmcp_log = logging.getLogger("fastmcp")
    for own in fastmcp_log.handlers[:]:  # imported already (the parser reads the tool registry)
        fastmcp_log.removeHandler(own)
    fastmcp_log.propagate = True
    fastmcp_log.setLevel(logging.NOTSET)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    if level > logging.DEBUG:
        handler.addFilter(_OursOrWarnings())
    logging.basicConfig(level=level, handlers=[handler], force=True)
