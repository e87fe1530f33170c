"""What the registry (api/registry.py) says of one tool, as values: its effects and its entry."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .models import Request

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

ULTRARAG = {"ultrarag", "full"}


@dataclass(frozen=True)
class Effects:
    """What a call does to the world (MCP's tool annotations say the same to an agent)."""

    read_only: bool
    destructive: bool = False  # it replaces or deletes what is there
    open_world: bool = False  # it calls a server elsewhere (a web provider, an LLM, a deployed retriever)
    idempotent: bool = True
    # it changes what the server serves every caller, beyond documents: the session (retriever_init), a
    # collection's whole index rebuilt, files written where a call says
    operator: bool = False


READ = Effects(read_only=True)


def scope_of(effects: Effects) -> str:
    """The scope a caller needs for a tool with these effects (issue 47), the one place it is decided:
    read-only tools need `read`; the operator's (session, index builds, files) `admin`; other writes
    (documents added, replaced, deleted) `write`. docs/security.md and docs/tools.md show the result."""
    if effects.read_only:
        return "read"
    return "admin" if effects.operator else "write"
Need = Callable[["Retriever"], str | None]  # None: the tool can work; else what to set first


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    request: type[Request]
    call: Callable[..., Any]  # (engine, request) -> reply; a coroutine function for the web tools
    doc: str
    outputs: tuple[str, ...] = ()  # the reply keys a pipeline keeps (UltraRAG's server.yaml `output`)
    effects: Effects = READ
    profiles: frozenset[str] = frozenset(ULTRARAG)
    needs: Need | None = None
    ultrarag_inputs: str | None = None  # UltraRAG's own declaration of its tool's inputs (q_ls = query_list)
    cli: str | None = None  # the `retriever` command that runs the same call, if any
    output_schema: dict[str, Any] | None = None  # MCP structured output (the agent tools)
    compute: bool = False  # a search on the encoder and the index: a small call runs on the compute thread
    long: bool = False  # runs long (a folder, a whole corpus): a client may run it as an MCP task (mcp/tasks.py)

    @cached_property
    def scope(self) -> str:
        return scope_of(self.effects)

    @cached_property
    def asynchronous(self) -> bool:
        """Whether `call` is a coroutine function (the web tools), asked once, not on every call."""
        return inspect.iscoroutinefunction(self.call)

    @property
    def writes(self) -> bool:
        return not self.effects.read_only and self.name != "retriever_init"

    def unavailable(self, engine: Retriever) -> str | None:
        """Why this tool cannot work with the loaded configuration (None: it can)."""
        return self.needs(engine) if self.needs else None
