"""Filters (filters.py) translated to Milvus boolean expressions, with the same semantics.

Milvus Lite and a Milvus server read expressions differently
(tests/test_milvus.py::test_portable_expressions runs the portable forms on both): Lite 3.2.2
refuses `in` / `not in` on a JSON path (`metadata["k"] in [1, 2]`: "left side of 'in' must be a
field reference"; write `==` joined by `or`), and treats a missing or null JSON key as unknown, so
`metadata["k"] != v` and `not (metadata["k"] == v)` skip rows without the key, where the 2.3.5
server keeps them; `(metadata["k"] != v or not (exists metadata["k"]))` means the same on both.
`exists` on a null value: true on the server, false on Lite. Neither parses `null` literals.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...errors import InvalidInputError
from ...filters import Filter, Logic


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
