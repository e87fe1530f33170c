"""Who is calling (issue 47): a principal, its scopes, the collections it may read and write, its
groups; and the static bearer tokens that name one (security.http.tokens_env / tokens_file /
principals; OAuth tokens: oauth.py).

`PRINCIPAL` is set by the HTTP guard for each request, as compute.CALLER is; where nobody set it (stdio,
the library, the command line, HTTP without tokens on loopback) the caller is the operator, with every
scope on every collection. Tokens are kept as sha256 digests only; a plain token of the environment or
the file is hashed as it is read and stands for a principal with every scope (today's behaviour).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from ..config import Config
from ..config.access import DEFAULT_COLLECTION, SCOPES, SHA256
from ..errors import ConfigError

log = logging.getLogger(__name__)
Action = Literal["read", "write"]
HASHED = "sha256:"
RELOAD_EVERY = 1.0  # seconds between looks at the tokens file's modification time


@dataclass(frozen=True)
class Principal:
    """A caller: `scopes` (read, write, admin), the collection patterns it may read and write (`*`:
    all, `default`: the default collection), its `groups`, and where it came from (operator, token,
    oauth). Never holds a token."""

    name: str
    scopes: frozenset[str]
    read: tuple[str, ...] = ("*",)
    write: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ()
    source: str = "token"

    def has(self, scope: str) -> bool:
        return scope in self.scopes

    def may(self, action: Action, collection: str | None) -> bool:
        """Whether it may `action` the collection named `collection` ("" or None: the default one)."""
        name = collection or DEFAULT_COLLECTION
        return any(fnmatchcase(name, p) for p in (self.read if action == "read" else self.write))

    @property
    def caller(self) -> str:
        """compute.CALLER for its requests, and what an MCP session is bound to: its name and source,
        hashed (two tokens of one principal are one caller; a token rotation keeps its sessions)."""
        return hashlib.sha256(f"{self.source}:{self.name}".encode()).hexdigest()[:16]

    @property
    def unrestricted(self) -> bool:
        """Every scope on every collection: the operator, or a plain token of the old kind."""
        return self.scopes == ALL_SCOPES and self.read == ("*",) and self.write == ("*",)


ALL_SCOPES = frozenset(SCOPES)
OPERATOR = Principal("operator", ALL_SCOPES, source="operator")
# The caller of the request being served (security/http_guard.py sets it); the operator where none did.
PRINCIPAL: ContextVar[Principal] = ContextVar("retriever_principal", default=OPERATOR)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def configured(cfg: Config) -> dict[str, Principal]:
    """security.http.principals as principals, by name."""
    return {p.name: Principal(p.name, frozenset(p.scopes), tuple(p.read), tuple(p.write), tuple(p.groups))
            for p in cfg.security.http.principals}


@dataclass(frozen=True)
class TokenTable:
    """sha256 digest of a token -> its principal."""

    by_digest: Mapping[str, Principal] = field(default_factory=dict)

    def find(self, token: str) -> Principal | None:
        return self.by_digest.get(digest(token)) if token else None

    def __len__(self) -> int:
        return len(self.by_digest)


def _entries(lines: Iterable[str], where: str, named: dict[str, Principal], start: int) -> dict[str, Principal]:
    """A token list's entries: `sha256:<hex> [principal]` or a plain token (every scope, named
    token-<n> by its place, from `start`). The messages never quote an entry."""
    out: dict[str, Principal] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith(HASHED):
            out.setdefault(digest(line), Principal(f"token-{start + len(out) + 1}", frozenset(SCOPES)))
            continue
        hexdigest, _, name = line[len(HASHED):].partition(" ")
        name = name.strip()
        if not SHA256.fullmatch(hexdigest):
            raise ConfigError(f"{where}, entry {number}: after sha256: come 64 lower-case hex digits "
                              "(printf %s \"$TOKEN\" | sha256sum)")
        if name and name not in named:
            raise ConfigError(f"{where}, entry {number}: no principal named {name!r} in security.http.principals "
                              f"(there: {', '.join(named) or 'none'})")
        out[hexdigest] = named[name] if name else Principal(f"token-{start + len(out) + 1}", frozenset(SCOPES))
    return out


def load_table(cfg: Config) -> TokenTable:
    """Every static token: the environment's, the file's, and the principals' own hashes."""
    h = cfg.security.http
    named = configured(cfg)
    table = {d: named[p.name] for p in h.principals for d in p.token_sha256}
    table.update(_entries(os.environ.get(h.tokens_env, "").split(","), f"${h.tokens_env}", named, len(table)))
    if h.tokens_file is not None:
        table.update(_entries(_read(h.tokens_file).splitlines(), f"security.http.tokens_file {h.tokens_file.name}",
                              named, len(table)))
    return TokenTable(table)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"security.http.tokens_file: cannot read {path} ({e.strerror})") from None


class StaticTokens:
    """The static tokens, the file's re-read when it changes (at most one look per RELOAD_EVERY):
    a rotation adds the new token, later removes the old, without a restart. A file that no longer
    reads keeps the last good table (logged), so a bad edit never opens the door."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.table = load_table(cfg)
        self._stamp = self._file_stamp()
        self._looked = time.monotonic()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.table)

    def find(self, token: str) -> Principal | None:
        self._refresh()
        return self.table.find(token)

    def _file_stamp(self) -> tuple[int, int] | None:
        path = self.cfg.security.http.tokens_file
        try:
            stat = path.stat() if path is not None else None
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if stat is not None else None

    def _refresh(self) -> None:
        if self.cfg.security.http.tokens_file is None or time.monotonic() - self._looked < RELOAD_EVERY:
            return
        with self._lock:
            self._looked = time.monotonic()
            stamp = self._file_stamp()
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                self.table = load_table(self.cfg)
            except ConfigError as e:
                log.warning("the tokens file changed but does not read (%s); the tokens read before stay", e)
                return
            log.info("security.http.tokens_file changed: %d static token(s) now", len(self.table))


__all__ = ["OPERATOR", "PRINCIPAL", "Action", "Principal", "StaticTokens", "TokenTable", "configured", "digest",
           "load_table"]
