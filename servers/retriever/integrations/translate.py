"""Each framework's filter syntax in our filter language (filters.py: Haystack's dictionaries), where it
maps; what does not map is refused with an error that names the part and what would do instead.

- Haystack: its filters are ours (`{"field": "meta.year", "operator": ">=", "value": 2020}`, AND /
  OR / NOT); checked as they are. `content` has no filter here: filter on `meta.<key>` or `id`.
- LlamaIndex: `MetadataFilters` of `MetadataFilter(key, value, operator)`, nested, with condition
  and / or / not. ==, !=, >, >=, <, <=, in, nin map; LlamaIndex's `not` means "none of them"
  (NOT of an OR here). any, all, contains, text_match and is_empty have no equal here.
- LangChain: the dictionaries of its vector stores' `filter` (FAISS, Chroma): `{"key": value}`
  (==), `{"key": {"$gte": 2020, "$lt": 2024}}` ($eq, $ne / $neq, $gt, $gte, $lt, $lte, $in, $nin),
  `{"$and": [...]}`, `{"$or": [...]}`, `{"$not": {...}}`; several keys in one dictionary: all of them.

Keys name metadata fields (`year` -> `meta.year`; dots reach into nested objects). The result is
checked by filters.parse, so a value of a kind we cannot compare is refused here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInputError
from ..filters import parse

LLAMAINDEX_OPERATORS = {"==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "in": "in",
                        "nin": "not in"}
LANGCHAIN_OPERATORS = {"$eq": "==", "$ne": "!=", "$neq": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<=",
                       "$in": "in", "$nin": "not in"}
LANGCHAIN_LOGIC = {"$and": "AND", "$or": "OR", "$not": "NOT"}


def checked(spec: dict[str, Any], syntax: str) -> dict[str, Any]:
    """`spec` (our language) after filters.parse accepts it; its error names the framework's syntax."""
    try:
        parse(spec)
    except InvalidInputError as e:
        raise InvalidInputError(f"{syntax} filter: {e}") from None
    return spec


def haystack(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """Haystack's filters are ours; `content` is the one field they have that we do not filter on."""
    if filters is None:
        return None
    if _names_content(filters):
        raise InvalidInputError("Haystack filter: field 'content' cannot be filtered here (the search ranks by "
                                "content); filter on 'meta.<key>' or 'id'")
    return checked(filters, "Haystack")


def _names_content(spec: Any) -> bool:
    if not isinstance(spec, Mapping):
        return False
    if spec.get("field") == "content":
        return True
    conditions = spec.get("conditions")
    return isinstance(conditions, list) and any(_names_content(c) for c in conditions)


def llamaindex(filters: Any) -> dict[str, Any] | None:
    """A LlamaIndex `MetadataFilters` (or None) in our language."""
    if filters is None:
        return None
    return checked(_llama_node(filters, "filters"), "LlamaIndex")


def _value(enum_or_str: Any) -> str:
    return str(getattr(enum_or_str, "value", enum_or_str))


def _llama_node(node: Any, where: str) -> dict[str, Any]:
    if hasattr(node, "filters"):  # MetadataFilters: a condition over its filters
        condition = _value(node.condition or "and").lower()
        parts = [_llama_node(f, f"{where}.filters[{i}]") for i, f in enumerate(node.filters)]
        if not parts:
            raise InvalidInputError(f"LlamaIndex filter {where}: MetadataFilters with no filters; give at least one "
                                    "MetadataFilter or pass filters=None")
        match condition:
            case "and" | "or":
                return parts[0] if len(parts) == 1 else {"operator": condition.upper(), "conditions": parts}
            case "not":  # LlamaIndex: none of them holds
                return {"operator": "NOT", "conditions": [{"operator": "OR", "conditions": parts}]}
        raise InvalidInputError(f"LlamaIndex filter {where}: condition {condition!r} has no equal here; use and, or "
                                "or not")
    operator = _value(getattr(node, "operator", "=="))
    if operator not in LLAMAINDEX_OPERATORS:
        raise InvalidInputError(f"LlamaIndex filter {where} (key {node.key!r}): operator {operator!r} has no equal "
                                f"here; the operators that map are {', '.join(LLAMAINDEX_OPERATORS)}")
    value = list(node.value) if isinstance(node.value, (list, tuple)) else node.value
    return {"field": f"meta.{node.key}", "operator": LLAMAINDEX_OPERATORS[operator], "value": value}


def langchain(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """A LangChain vector store's `filter` dictionary (or None) in our language."""
    if filters is None:
        return None
    return checked(_lc_node(filters, "filter"), "LangChain")


def _all(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return parts[0] if len(parts) == 1 else {"operator": "AND", "conditions": parts}


def _lc_node(node: Any, where: str) -> dict[str, Any]:
    if not isinstance(node, Mapping) or not node:
        raise InvalidInputError(f"LangChain filter {where}: expected a non-empty dictionary such as "
                                f"{{'year': {{'$gte': 2020}}}}, got {node!r}")
    parts = []
    for key, value in node.items():
        at = f"{where}.{key}"
        if key in LANGCHAIN_LOGIC:
            parts.append(_lc_logic(key, value, at))
        elif isinstance(key, str) and key.startswith("$"):
            raise InvalidInputError(f"LangChain filter {at}: {key!r} has no equal here; the logic operators are "
                                    f"{', '.join(LANGCHAIN_LOGIC)}, and a field's are {', '.join(LANGCHAIN_OPERATORS)}")
        elif isinstance(value, Mapping):
            parts.append(_all([_lc_comparison(key, op, v, at) for op, v in value.items()]) if value else
                         _lc_comparison(key, "{}", value, at))
        else:
            parts.append({"field": f"meta.{key}", "operator": "==", "value": value})
    return _all(parts)


def _lc_logic(key: str, value: Any, where: str) -> dict[str, Any]:
    if key == "$not":
        inner = [_lc_node(v, f"{where}[{i}]") for i, v in enumerate(value)] if isinstance(value, list) else \
            [_lc_node(value, where)]
        return {"operator": "NOT", "conditions": [_all(inner)]}
    if not isinstance(value, list) or not value:
        raise InvalidInputError(f"LangChain filter {where}: {key} takes a non-empty list of filters, got {value!r}")
    return {"operator": LANGCHAIN_LOGIC[key], "conditions": [_lc_node(v, f"{where}[{i}]") for i, v in enumerate(value)]}


def _lc_comparison(key: str, operator: str, value: Any, where: str) -> dict[str, Any]:
    if operator not in LANGCHAIN_OPERATORS:
        raise InvalidInputError(f"LangChain filter {where}: operator {operator!r} has no equal here; the operators "
                                f"that map are {', '.join(LANGCHAIN_OPERATORS)}")
    return {"field": f"meta.{key}", "operator": LANGCHAIN_OPERATORS[operator], "value": value}
