"""Hypothesis strategies from a tool's own JSON schema (the `tools/list` input schema): valid
arguments, so a fuzz reaches the engine rather than stopping at validation. A small generator for
the schema features our tools use (hypothesis-jsonschema 0.23 does not run on this Hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

WORDS = st.sampled_from(["what causes earthquakes", "black holes", "doc01", "doc11", "photosynthesis", "", "a"])
FIELDS = st.sampled_from(["id", "meta.title", "meta.year", "meta.topic", "meta.nope", "meta.a.b"])
SCALARS = st.none() | st.booleans() | st.integers(-5, 3000) | st.text(max_size=8) | st.sampled_from(["doc01", "2020"])
COMPARISON = st.fixed_dictionaries({"field": FIELDS, "operator": st.sampled_from(["==", "!=", ">", ">=", "<", "<="]),
                                    "value": SCALARS})
MEMBERSHIP = st.fixed_dictionaries({"field": FIELDS, "operator": st.sampled_from(["in", "not in"]),
                                    "value": st.lists(SCALARS, min_size=1, max_size=3)})
FILTERS = st.recursive(COMPARISON | MEMBERSHIP, lambda inner: st.fixed_dictionaries(
    {"operator": st.sampled_from(["AND", "OR", "NOT"]), "conditions": st.lists(inner, min_size=1, max_size=3)}),
    max_leaves=5)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=3), max_leaves=6)
DOCUMENTS = st.lists(st.fixed_dictionaries({"id": st.sampled_from(["n1", "n2", "doc01", "doc02"]) | st.text(max_size=6),
                                            "contents": WORDS | st.text(max_size=40)},
                                           optional={"year": st.integers(1990, 2030), "topic": WORDS}),
                     min_size=1, max_size=3)
BY_NAME = {"filters": FILTERS, "documents": DOCUMENTS}  # properties whose schema says only "object"


def from_schema(schema: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
    if name in BY_NAME and schema.get("type") != "null":
        return BY_NAME[name] | st.none() if "anyOf" in schema else BY_NAME[name]
    if "anyOf" in schema:
        return st.one_of([from_schema(s, name) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    match schema.get("type"):
        case "object":
            props = schema.get("properties")
            if props is None:
                return st.dictionaries(st.text(max_size=8), JSON, max_size=3)
            required = set(schema.get("required", []))
            optional = sorted(k for k in props if k not in required)

            @st.composite
            def arguments(draw: st.DrawFn) -> dict[str, Any]:
                """The required ones and a few optional ones (each left out takes its default)."""
                out = {k: draw(from_schema(props[k], k)) for k in sorted(required)}
                chosen = draw(st.lists(st.sampled_from(optional), unique=True, max_size=3)) if optional else []
                return out | {k: draw(from_schema(props[k], k)) for k in chosen}

            return arguments()
        case "array":
            items = schema.get("items")
            return st.lists(from_schema(items, name) if items else JSON, min_size=0, max_size=4)
        case "string":
            return WORDS | st.text(max_size=20)
        case "integer":
            low = schema.get("minimum", -10)
            high = schema.get("maximum", low + 10**6)
            return st.integers(low, min(high, low + 12)) | st.integers(low, high)
        case "number":
            low, high = schema.get("minimum"), schema.get("maximum", schema.get("exclusiveMaximum"))
            return st.floats(low, high, exclude_max="exclusiveMaximum" in schema, allow_nan=False,
                             allow_infinity=False)
        case "boolean":
            return st.booleans()
        case "null":
            return st.none()
    return JSON
