"""One filter language for every search: Haystack's filter dictionaries.

    {"field": "meta.year", "operator": ">=", "value": 2020}
    {"operator": "AND" | "OR" | "NOT", "conditions": [<filter>, ...]}   (nested up to 32 levels)

`field` is `id` (the document id) or `meta.<key>` (a metadata field; dots reach into nested
objects). NOT is true when not all of its conditions hold (Haystack's meaning).

Semantics, the same on every backend: a comparison with a field the document does not have is
false, whatever the operator (`!=` and `not in` included); NOT then negates as usual. `==` and
`!=` compare values of any JSON type; `>`, `>=`, `<`, `<=` compare numbers with numbers and
strings with strings (ISO dates order correctly), any other pair is false. `in` / `not in` take
a non-empty list, looked up in a set (a document costs the same whatever the list's length); a
filter holds at most MAX_VALUES values in its lists together. NaN and infinities are refused.

`parse` checks a dictionary once and gives a tree of frozen nodes; `matches` evaluates it in
Python; a backend that evaluates filters itself translates the tree (indexes/milvus/filters.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError

COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
LOGIC = ("AND", "OR", "NOT")
_MISSING = object()
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}
MAX_NESTING = 32  # logic nodes inside each other; deeper is refused before anything recurses on it
MAX_VALUES = 100_000  # values of the `in` / `not in` lists of one filter together (a 1 MB request)
_HELP = (f"a filter is {{'field': 'meta.<key>' or 'id', 'operator': one of {list(COMPARISONS)}, 'value': ...}} "
         f"or {{'operator': one of {list(LOGIC)}, 'conditions': [filters]}}")


@dataclass(frozen=True, slots=True)
class Comparison:
    path: tuple[str, ...]  # ("id",) or ("meta", key, subkey, ...)
    op: str
    value: Any
    members: frozenset[Any] = field(default=frozenset(), compare=False, repr=False)  # `in` lists' keys (_key)


@dataclass(frozen=True, slots=True)
class Logic:
    op: str
    conditions: tuple[Filter, ...]


Filter = Comparison | Logic


def parse(spec: Any, where: str = "filters", depth: int = 0) -> Filter:
    """A filter dictionary -> a checked tree; a malformed one names the problem and the choices."""
    tree = _parse(spec, where, depth)
    if depth == 0:
        total = sum(len(c.value) for c in _comparisons(tree) if c.op in ("in", "not in"))
        _check_values(total, where)
    return tree


def _parse(spec: Any, where: str, depth: int) -> Filter:
    if depth > MAX_NESTING:
        raise InvalidInputError(f"{where.split('.')[0]}: the filter is nested more than {MAX_NESTING} levels deep; "
                                "flatten it (AND and OR take any number of conditions)")
    if not isinstance(spec, Mapping):
        raise InvalidInputError(f"{where}: expected a dictionary, got {type(spec).__name__}; {_HELP}")
    op = spec.get("operator")
    if "conditions" in spec or op in LOGIC:
        return _parse_logic(spec, where, depth)
    extra = set(spec) - {"field", "operator", "value"}
    if extra or not {"field", "operator", "value"} <= set(spec):
        raise InvalidInputError(f"{where}: a comparison has exactly the keys field, operator and value, "
                                f"got {sorted(spec)}; {_HELP}")
    if op not in COMPARISONS:
        raise InvalidInputError(f"{where}: unknown operator {op!r}; valid comparison operators: "
                                f"{list(COMPARISONS)}, logic operators: {list(LOGIC)}")
    value = _check_value(op, spec["value"], where)
    members = frozenset(map(_key, value)) if op in ("in", "not in") else frozenset()
    return Comparison(_parse_field(spec["field"], where), op, value, members)


def _parse_logic(spec: Mapping[str, Any], where: str, depth: int) -> Logic:
    op, conditions = spec.get("operator"), spec.get("conditions")
    if op not in LOGIC:
        raise InvalidInputError(f"{where}: a node with conditions needs operator one of {list(LOGIC)}, got {op!r}")
    if set(spec) != {"operator", "conditions"}:
        raise InvalidInputError(f"{where}: a {op} node has exactly the keys operator and conditions, got {sorted(spec)}")
    if not isinstance(conditions, list) or not conditions:
        raise InvalidInputError(f"{where}: {op} needs a non-empty list of conditions")
    return Logic(op, tuple(_parse(c, f"{where}.conditions[{i}]", depth + 1) for i, c in enumerate(conditions)))


def _parse_field(field: Any, where: str) -> tuple[str, ...]:
    if field == "id":
        return ("id",)
    if isinstance(field, str) and field.startswith("meta.") and all(field.split(".")):
        return tuple(field.split("."))
    raise InvalidInputError(f"{where}: field must be 'id' or 'meta.<key>' (e.g. 'meta.year'), got {field!r}")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def _check_value(op: str, value: Any, where: str) -> Any:
    if op in ("in", "not in"):
        if isinstance(value, list):
            _check_values(len(value), where)
        if not isinstance(value, list) or not value or not all(_scalar(v) for v in value):
            raise InvalidInputError(f"{where}: '{op}' needs a non-empty list of strings, numbers or booleans, "
                                    f"got {value!r}")
        return tuple(value)
    if op in _ORDER and not (_number(value) and math.isfinite(value) or isinstance(value, str)):
        raise InvalidInputError(f"{where}: '{op}' compares numbers or strings, got {value!r}")
    if not _scalar(value):
        raise InvalidInputError(f"{where}: value must be a string, number, boolean or null, got {value!r}")
    return value


def _check_values(count: int, where: str) -> None:
    if count > MAX_VALUES:
        raise InvalidInputError(f"{where.split('.')[0]}: {count} values in the filter's 'in' / 'not in' lists, the "
                                f"limit is {MAX_VALUES} (filters.MAX_VALUES); filter on a field the documents share "
                                "(a tag, a source) instead of listing them")


def _key(value: Any) -> tuple[str, Any]:
    """A scalar's key in an `in` set, equal where _equal is: 1 and 1.0 one key, True and 1 two."""
    return ("b" if isinstance(value, bool) else "n" if _number(value) else "s" if isinstance(value, str) else "z", value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---- evaluation in Python ---------------------------------------------------------------------


def _lookup(path: tuple[str, ...], doc_id: str, metadata: Mapping[str, Any]) -> Any:
    if path == ("id",):
        return doc_id
    node: Any = metadata
    for key in path[1:]:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _member(have: Any, members: frozenset[Any]) -> bool:
    """Whether `have` equals a value of the set (a list or an object equals no scalar)."""
    try:
        return _key(have) in members
    except TypeError:  # unhashable: a list or an object, never equal to a scalar
        return False


def _compare(op: str, have: Any, want: Any, members: frozenset[Any] = frozenset()) -> bool:
    if have is _MISSING:
        return False
    match op:
        case "==":
            return _equal(have, want)
        case "!=":
            return not _equal(have, want)
        case "in" | "not in":
            return _member(have, members) == (op == "in")
    if _number(have) and _number(want) or isinstance(have, str) and isinstance(want, str):
        return _ORDER[op](have, want)
    return False


def matches(f: Filter, doc_id: str, metadata: Mapping[str, Any]) -> bool:
    """Whether a document (its id and metadata) passes the filter."""
    if isinstance(f, Comparison):
        return _compare(f.op, _lookup(f.path, doc_id, metadata), f.value, f.members)
    results = (matches(c, doc_id, metadata) for c in f.conditions)
    match f.op:
        case "AND":
            return all(results)
        case "OR":
            return any(results)
    return not all(results)


# ---- filters that cannot match ----------------------------------------------------------------

MAX_DEPTH = 4  # nested metadata objects are described this deep


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if _number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def field_types(records: Iterable[Mapping[str, Any]], into: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """`meta.<key>` (dotted into nested objects) -> the JSON types its values have in `records`."""
    out = {} if into is None else into

    def walk(prefix: str, node: Mapping[str, Any], depth: int) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}"
            out.setdefault(path, set()).add(json_type(value))
            if isinstance(value, Mapping) and depth < MAX_DEPTH:
                walk(path, value, depth + 1)

    for metadata in records:
        walk("meta", metadata, 1)
    return out


def _comparisons(f: Filter) -> Iterator[Comparison]:
    if isinstance(f, Comparison):
        yield f
    else:
        for c in f.conditions:
            yield from _comparisons(c)


def type_warnings(spec: Any, types: Mapping[str, set[str]]) -> list[str]:
    """Why parts of a (valid) filter cannot match any document whose fields have `types`: a field
    none has, or a value of a type the field never holds. Warnings, not errors: "no match" is a
    real answer too."""
    out: list[str] = []
    for c in _comparisons(parse(spec)):
        if c.path == ("id",):
            continue
        field = ".".join(c.path)
        held = types.get(field)
        if held is None:
            known = ", ".join(sorted(types)[:20]) or "none"
            out.append(f"filter field {field!r}: no document of the collection has it (fields: {known})")
            continue
        values = c.value if c.op in ("in", "not in") else (c.value,)
        given = {json_type(v) for v in values}
        if not given & held:
            out.append(f"filter field {field!r} holds {'/'.join(sorted(held))} values; the filter compares it with "
                       f"{'/'.join(sorted(given))} {c.value!r}, which never matches")
    return out
