"""Filters (filters.py) translated to Milvus boolean expressions, with the same semantics.

Milvus Lite and a Milvus server read expressions differently
(tests/test_milvus.py::test_portable_expressions runs the portable forms on both): Lite 3.2.2
refuses `in` / `not in` on a JSON path (`metadata["k"] in [1, 2]`: "left side of 'in' must be a
field reference"; write `==` joined by `or`), and treats a missing or null JSON key as unknown, so
`metadata["k"] != v` and `not (metadata["k"] == v)` skip rows without the key, where the 2.3.5
server keeps them; `(metadata["k"] != v or not (exists metadata["k"]))` means the same on both.
`exists` on a null value: true on the server, false on Lite. Neither parses `null` literals.

`visible` is the other expression this module writes: a caller's document visibility
(security/visibility.py `Rule.sees`), ANDed into every search, read, count and delete of a collection
whose documents Milvus holds (`where`), as a local collection ANDs its mask before ranking.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...errors import InvalidInputError
from ...filters import Filter, Logic
from ...security.visibility import EVERYONE, Rule


def to_milvus(f: Filter, id_field: str = "id", meta_field: str = "metadata") -> str:
    """The filter as a Milvus boolean expression over a VARCHAR id field and a JSON metadata field.

    Portable between Milvus Lite and a Milvus server, with this module's semantics: a comparison
    on a JSON key is guarded by `exists` (a missing key is false, never Milvus's "unknown", so
    NOT negates it as in Python), and `in` / `not in` on a JSON key become `==` / `!=` joined by
    or / and (Milvus Lite accepts `in` only on a field)."""
    if isinstance(f, Logic):
        parts = [f"({to_milvus(c, id_field, meta_field)})" for c in f.conditions]
        if f.op == "NOT":
            return f"not ({' and '.join(parts)})"
        return f" {f.op.lower()} ".join(parts)
    if f.path == ("id",):
        values = _milvus_literal(list(f.value)) if f.op in ("in", "not in") else _milvus_literal(f.value)
        return f"{id_field} {f.op} {values}"
    target = meta_field + "".join(f"[{json.dumps(k, ensure_ascii=False)}]" for k in f.path[1:])
    match f.op:
        case "in":
            test = " or ".join(f"{target} == {_milvus_literal(v)}" for v in f.value)
        case "not in":
            test = " and ".join(f"{target} != {_milvus_literal(v)}" for v in f.value)
        case _:
            test = f"{target} {f.op} {_milvus_literal(f.value)}"
    return f"(exists {target}) and ({test})"  # parenthesised: the 2.3 parser binds `exists` loosely


def where(f: Filter | None, rule: Rule | None, id_field: str = "id", meta_field: str = "metadata") -> str | None:
    """A search's or a read's expression: the filter's, ANDed with the caller's visibility (None: neither)."""
    parts = [e for e in (to_milvus(f, id_field, meta_field) if f is not None else None,
                         visible(rule, meta_field) if rule is not None else None) if e]
    return " and ".join(f"({e})" for e in parts) if parts else None


def visible(rule: Rule, meta_field: str = "metadata") -> str:
    """The documents `rule` sees, as a Milvus expression (Rule.sees, checked on Milvus Lite 3.2.2 by
    tests/test_visibility_held.py): the field is one of the caller's groups or "*" (a string compared
    with `==`, a list with `json_contains_any`: Lite reads neither `in` on a JSON path nor a list
    literal after `==`); where `missing` is public, also a document without the field, or whose value
    is neither a string (`like "%"`) nor a non-empty list (`exists f[0]`): a number, an object, `[]`.

    Where Milvus cannot tell what Python does: a list holding a non-string (`["eng", 5]`) counts as
    missing in Rule.sees, and here as the list of its names; the hits are checked with Rule.sees too
    (index.py), so such a document is never shown where the rule hides it, and where `missing` is
    public a list of other groups with a non-string in it stays hidden here (never more than Python shows).
    A group name with a control character, which no expression can carry, is left out (it sees less)."""
    target = f"{meta_field}[{json.dumps(rule.field, ensure_ascii=False)}]"
    names = [_milvus_literal(n) for n in (EVERYONE, *sorted(rule.groups)) if not _CONTROL.search(n)]
    named = " or ".join([*(f"{target} == {n}" for n in names), f"json_contains_any({target}, [{', '.join(names)}])"])
    out = f"((exists {target}) and ({named}))"
    if rule.missing == "public":  # `not` after `exists`: Lite reads a comparison with a missing key as unknown
        out += (f" or (not (exists {target})) or ((exists {target}) and not ({target} like \"%\")"
                f" and not (exists {target}[0]))")
    return out


def _milvus_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_milvus_literal(v) for v in value) + "]"
    if value is None:
        raise InvalidInputError("Milvus expressions have no null literal; filter on null values is not "
                                "supported with index_backend: milvus")
    if isinstance(value, str) and (bad := _CONTROL.search(value)):
        raise InvalidInputError(f"a filter value holds the control character U+{ord(bad.group()):04X}, which a Milvus "
                                "expression cannot carry; leave it out of the value")
    return json.dumps(value, ensure_ascii=False)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
