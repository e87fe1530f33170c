"""Who may call what (issue 47), as every face asks it: a tool's scope (its effects decide: tool.py
scope_of), the collections a request reads or writes, the refusal for a principal without them, and
the audit line of every write. The principal is the request's (security/principals.py PRINCIPAL: the
HTTP guard's caller; the operator on stdio, in the library and on the command line)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..config.access import DEFAULT_COLLECTION
from ..security import visibility
from ..security.principals import Action, Principal
from .models import Request
from .tool import Tool

if TYPE_CHECKING:
    from ..engine.retriever import Retriever

audit_log = logging.getLogger("retriever.audit")
COLLECTION_FIELDS = ("collection_name", "collection")  # a request's one collection; `collections`: several


def action(scope: str) -> Action:
    """What a call needing `scope` does to the collections it names: reads (scope read), else writes."""
    return "read" if scope == "read" else "write"


def collections_of(engine: Retriever, request: Request) -> list[str]:
    """The collections a request acts on, by name (`default`: the default collection): those it names
    (collection_name, collection, collections; UltraRAG's project memory: user_<id>), else the session's
    (the one retriever_init opened, the YAML's until then)."""
    named = request.given("collections")
    if isinstance(named, list):
        return [_label(c) for c in named]
    if "current_user_id" in request.__dict__:
        return [f"user_{request.given('current_user_id')}"]
    for key in COLLECTION_FIELDS:
        value = request.given(key)
        if isinstance(value, str):
            return [_label(value)]
    return [_label(engine.config.collection_name)]


def named_in(engine: Retriever, arguments: Mapping[str, Any]) -> list[str]:
    """The collections a call's raw arguments name, as collections_of reads a request's, for a call refused
    before its arguments are validated (its audit line): names that are strings only, each cut at 200
    characters, at most 100 of them."""
    named = arguments.get("collections")
    if isinstance(named, list):
        return [_label(c)[:200] for c in named if isinstance(c, str)][:100]
    for key in COLLECTION_FIELDS:
        value = arguments.get(key)
        if isinstance(value, str):
            return [_label(value)[:200]]
    return [_label(engine.config.collection_name)]


def _label(name: str | None) -> str:
    return name or DEFAULT_COLLECTION


def needs(principal: Principal, what: str, scope: str) -> str | None:
    """Why `principal` may not call `what` (a tool, a route) that needs `scope` (None: it may)."""
    if principal.has(scope):
        return None
    held = ", ".join(sorted(principal.scopes)) or "none"
    return (f"{what} needs the scope {scope!r}; this caller ({principal.name}) has: {held} "
            "(ask the operator or the token's issuer for it)")


def scope_refusal(principal: Principal, tool: Tool) -> str | None:
    """Why `principal` may not call `tool` at all (None: its scopes allow it)."""
    return needs(principal, tool.name, tool.scope)


def refusal(principal: Principal, tool: Tool, engine: Retriever, request: Request) -> str | None:
    """Why `principal` may not make this call: the scope, then each collection it acts on, by name."""
    return access_refusal(principal, tool.name, tool.scope, engine, request)


def access_refusal(principal: Principal, what: str, scope: str, engine: Retriever, request: Request) -> str | None:
    """Why `principal` may not make a request of `what` (needing `scope`) on the collections it acts on."""
    if principal.unrestricted:  # every scope on every collection, and every document seen (the operator)
        return None
    return (_granted(principal, what, scope, collections_of(engine, request))
            or unseeing(principal, what, engine))


def read_refusal(principal: Principal, what: str, engine: Retriever) -> str | None:
    """Why `principal` may not read the session's documents by `what` (resources/read of
    retriever://documents/<id>, which reads the session's collection): the `read` scope and a read grant
    on that collection, as a read tool's call of it needs (None: it may)."""
    return _granted(principal, what, "read", [_label(engine.config.collection_name)])


def _granted(principal: Principal, what: str, scope: str, collections: list[str]) -> str | None:
    """Why `principal` may not do `what` (needing `scope`) on `collections`: the scope, then each
    collection's grant, by name (None: it may)."""
    why = needs(principal, what, scope)
    if why is not None:
        return why
    act = action(scope)
    denied = [c for c in collections if not principal.may(act, c)]
    if denied:
        return f"{what}: {principal.name} may not {act} the collection {denied[0]!r} (security.http: its {act} grants)"
    return None


# Tools that cannot apply document visibility, refused to a caller that sees only some documents
UNSEEING = {
    "retriever_graph_search": "its graph's triples come from every document",
    "retriever_extract_triples": "it reads documents into a graph every caller's graph search walks",
    "retriever_deploy_search": "the deployed retriever answers as this server's operator",
    "sync_sources": "it writes the YAML's folders as they are, without the checks a caller's own writes get "
                    "(groups it holds, documents it sees)",
}


def unseeing(principal: Principal, what: str, engine: Retriever) -> str | None:
    """Why `what` is refused to `principal` under security.visibility (None: it is not, or visibility is off)."""
    if what not in UNSEEING or visibility.rule(engine.config, principal) is None:
        return None
    return (f"{what}: security.visibility is on and this caller ({principal.name}) sees only some documents; "
            f"{UNSEEING[what]}, so it is refused (a principal with the admin scope may call it)")


def visible(principal: Principal, payload: Any) -> Any:
    """A reply that lists collections (`collections`: [{name, ...}], list_collections) lists only those
    the caller may read: a name it may not read is not told either."""
    listed = payload.get("collections") if isinstance(payload, dict) else None
    if principal.unrestricted or not isinstance(listed, list):
        return payload
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in listed):
        return payload
    return {**payload, "collections": [c for c in listed if principal.may("read", c["name"])]}


def listed(principal: Principal, tools: Iterable[Tool], engine: Retriever | None = None) -> set[str]:
    """The names of `tools` a principal may call (tools/list shows it only these): those its scopes
    reach, less, given the `engine`, those refused to it under security.visibility (UNSEEING)."""
    return {t.name for t in tools
            if principal.has(t.scope) and (engine is None or unseeing(principal, t.name, engine) is None)}


def audit(principal: Principal, tool: Tool, engine: Retriever, request: Request | Mapping[str, Any], outcome: str,
          payload: Any = None) -> None:
    """One line on the `retriever.audit` logger for a call that writes (scope write or admin): who,
    which tool, which collections, the outcome and the reply's counts. Never a token, never a text.
    `request`: the call's request, or its raw arguments where it is refused before they are validated
    (for its scope: mcp/core.py Gate.refusal)."""
    if tool.scope == "read":
        return
    names = named_in(engine, request) if isinstance(request, Mapping) else collections_of(engine, request)
    line = {"principal": principal.name, "source": principal.source, "tool": tool.name,
            "collections": names, "outcome": outcome, **counts(payload)}
    audit_log.info("%s", json.dumps(line, sort_keys=False))


def counts(payload: Any) -> dict[str, int]:
    """The numbers of a write's reply: its integers, and the length of its lists (ids, not_found, ...)."""
    if not isinstance(payload, dict):
        return {}
    out = {}
    for key, value in payload.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            out[key] = value
        elif isinstance(value, (list, dict)):
            out[key] = len(value)
    return out


__all__ = ["access_refusal", "action", "audit", "collections_of", "counts", "listed", "named_in", "needs", "read_refusal",
           "refusal", "scope_refusal", "unseeing", "visible"]
