"""Document-level visibility (issue 47): the one place that turns the caller (principals.PRINCIPAL)
into what it may see of a collection's documents.

`security.visibility.field` names a metadata key holding the groups that may see a document (a group
name or a list of them; `"*"`: everyone); `missing` says what a document without it is (hidden, the
default, or public). The operator (stdio, the library, the command line) and principals with the
`admin` scope see every document: `rule()` is None for them, and when visibility is off.

A rule is applied where the documents are read: a local collection's candidate rows are ANDed with
its mask before ranking (store/collection.py `Collection.allowed`), a read by id drops what it may not
see (engine/documents.py), so a hidden document answers as a missing one. A collection whose documents
Milvus holds (is_demo / full_text) gets the rule as a Milvus expression ANDed into each search, read,
count and delete (indexes/milvus/filters.py `visible`; HeldDocuments.seen_by), its hits checked with
`Rule.sees` again. What cannot apply it (a graph of triples, a deployed retriever elsewhere, a folder's
files) is refused for such a caller: `refuse`, api/grants.py UNSEEING.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import ForbiddenError
from .principals import PRINCIPAL, Principal

EVERYONE = "*"


@dataclass(frozen=True)
class Rule:
    """What one caller sees: documents whose `field` names one of its `groups` (or `*`); those without
    the field where `missing` is public. Hashable: a collection caches its mask per rule."""

    field: str
    missing: str  # hidden | public
    groups: frozenset[str]
    name: str = ""  # the caller's, for messages (not part of the mask's key)

    @property
    def key(self) -> tuple[str, str, frozenset[str]]:
        return self.field, self.missing, self.groups

    def sees(self, metadata: Mapping[str, Any]) -> bool:
        names = granted(metadata, self.field)
        if names is None:
            return self.missing == "public"
        return any(n == EVERYONE or n in self.groups for n in names)


def granted(metadata: Mapping[str, Any], field: str) -> list[str] | None:
    """The names a document's `field` holds (None: it has none; a value that is not a name or a list of
    names counts as none: hidden where missing is hidden)."""
    value = metadata.get(field) if isinstance(metadata, Mapping) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def sees_all(principal: Principal) -> bool:
    """The operator, a plain token of every scope, and principals with the admin scope see every document."""
    return principal.unrestricted or principal.has("admin")


def rule(cfg: Config, principal: Principal | None = None) -> Rule | None:
    """The current caller's rule for a collection served with `cfg` (None: it sees every document)."""
    v = cfg.security.visibility
    p = PRINCIPAL.get() if principal is None else principal
    if v is None or sees_all(p):
        return None
    return Rule(v.field, v.missing, frozenset(p.groups), p.name)


def refuse(cfg: Config, what: str, why: str) -> None:
    """Refuse `what` for a caller that sees only some documents: it cannot apply the rule (`why`)."""
    r = rule(cfg)
    if r is not None:
        raise ForbiddenError(f"{what}: security.visibility is on and this caller ({r.name}) sees only some documents; "
                             f"{why}, so it is refused (a principal with the admin scope may call it)")


def check_written(cfg: Config, metadata: Iterable[Mapping[str, Any]], what: str) -> None:
    """A caller that sees only some documents writes documents visible to its own groups only: each
    names groups it holds in the field (never `*`); none without the field where missing is public."""
    r = rule(cfg)
    if r is None:
        return
    for i, meta in enumerate(metadata):
        names = granted(meta, r.field)
        if names is None:
            if r.missing == "public" or r.field in meta:
                raise ForbiddenError(f"{what}: document {i} needs the metadata field {r.field!r} naming groups this "
                                     f"caller ({r.name}) holds: {_held(r)} (security.visibility)")
            continue
        given = [n for n in names if n == EVERYONE or n not in r.groups]
        if given:
            raise ForbiddenError(f"{what}: document {i} names {given[0]!r} in {r.field!r}; this caller ({r.name}) may "
                                 f"grant only the groups it holds: {_held(r)} (security.visibility)")


def _held(r: Rule) -> str:
    return ", ".join(sorted(r.groups)) or "none"


__all__ = ["EVERYONE", "Rule", "check_written", "granted", "refuse", "rule", "sees_all"]
