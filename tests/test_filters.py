"""Metadata filters: the language (parse, evaluate, translate) and exact filtered search on
FAISS and BM25 (the same ids as the unfiltered full ranking restricted to the matching rows)."""

from __future__ import annotations

import functools
import json

import pytest
from conftest import MCP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retriever.errors import InvalidInputError
from retriever.filters import matches, parse
from retriever.indexes.milvus.filters import to_milvus
from retriever.testing.projects import SAMPLE

DOCS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
META = {d["id"]: {"topic": d["topic"], "year": d["year"]} for d in DOCS}
Q = "How do plants turn sunlight into sugar?"


def cmp(field: str, op: str, value: object) -> dict:
    return {"field": field, "operator": op, "value": value}


@pytest.mark.parametrize(
    "spec, message",
    [
        pytest.param("year > 3", "expected a dictionary", id="not-a-dict"),
        pytest.param(cmp("meta.year", "~", 1), "unknown operator '~'; valid comparison operators", id="bad-op"),
        pytest.param({"field": "meta.year", "operator": "=="}, "exactly the keys field, operator and value",
                     id="no-value"),
        pytest.param(cmp("year", "==", 1), "field must be 'id' or 'meta.<key>'", id="bare-field"),
        pytest.param(cmp("meta.", "==", 1), "field must be 'id' or 'meta.<key>'", id="empty-key"),
        pytest.param(cmp("meta.year", "in", 2020), "'in' needs a non-empty list", id="in-scalar"),
        pytest.param(cmp("meta.year", "in", []), "'in' needs a non-empty list", id="in-empty"),
        pytest.param(cmp("meta.year", ">", [1]), "'>' compares numbers or strings", id="gt-list"),
        pytest.param(cmp("meta.year", "==", {"a": 1}), "value must be a string, number", id="eq-dict"),
        pytest.param({"operator": "AND", "conditions": []}, "AND needs a non-empty list", id="and-empty"),
        pytest.param({"operator": "XOR", "conditions": [cmp("id", "==", "a")]}, "operator one of ['AND', 'OR', 'NOT']",
                     id="bad-logic"),
        pytest.param({"operator": "OR", "conditions": [cmp("id", "===", "a")]}, "filters.conditions[0]: unknown",
                     id="nested-error-path"),
    ],
)
def test_malformed_filters_name_the_problem(spec: object, message: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        parse(spec)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "spec, expected",
    [
        pytest.param(cmp("meta.topic", "==", "biology"), {"doc00", "doc01", "doc02", "doc28"}, id="eq"),
        pytest.param(cmp("meta.year", ">=", 2022), {"doc05", "doc15", "doc16", "doc17", "doc24", "doc29"}, id="ge"),
        pytest.param(cmp("id", "in", ["doc03", "doc07", "nope"]), {"doc03", "doc07"}, id="id-in"),
        pytest.param({"operator": "AND", "conditions": [cmp("meta.topic", "==", "biology"),
                                                        cmp("meta.year", "<", 2019)]}, {"doc02", "doc28"}, id="and"),
        pytest.param({"operator": "NOT", "conditions": [cmp("meta.year", "<", 2023)]},
                     {"doc15", "doc16", "doc29"}, id="not"),
        pytest.param(cmp("meta.missing", "!=", 1), set(), id="missing-field-is-false"),
        pytest.param(cmp("meta.year", ">", "2020"), set(), id="number-vs-string-is-false"),
    ],
)
def test_matches(spec: dict, expected: set[str]) -> None:
    f = parse(spec)
    got = {doc_id for doc_id, meta in META.items() if matches(f, doc_id, meta)}
    assert got == expected


def test_nested_metadata_and_booleans() -> None:
    meta = {"a": {"b": 3}, "flag": True, "n": 1}
    assert matches(parse(cmp("meta.a.b", "==", 3)), "x", meta)
    assert not matches(parse(cmp("meta.flag", "==", 1)), "x", meta)  # JSON: true is not 1
    assert not matches(parse(cmp("meta.n", "==", True)), "x", meta)
    assert matches(parse(cmp("meta.n", "==", 1.0)), "x", meta)


@pytest.mark.parametrize(
    "spec, expr",
    [
        pytest.param(cmp("meta.year", ">=", 2020), '(exists metadata["year"]) and (metadata["year"] >= 2020)', id="cmp"),
        pytest.param(cmp("id", "in", ["a", "b"]), 'id in ["a", "b"]', id="id-in"),
        pytest.param(cmp("meta.a.b", "not in", [1, True]),
                     '(exists metadata["a"]["b"]) and (metadata["a"]["b"] != 1 and metadata["a"]["b"] != true)',
                     id="nested-not-in"),
        pytest.param(cmp("meta.t", "in", ["x", "y"]),
                     '(exists metadata["t"]) and (metadata["t"] == "x" or metadata["t"] == "y")', id="in"),
        pytest.param({"operator": "OR", "conditions": [cmp("id", "==", 'x"y'), cmp("id", "!=", "z")]},
                     '(id == "x\\"y") or (id != "z")', id="or-escape"),
        pytest.param({"operator": "NOT", "conditions": [cmp("id", "==", "x"), cmp("id", "<", "b")]},
                     'not ((id == "x") and (id < "b"))', id="not"),
    ],
)
def test_to_milvus(spec: dict, expr: str) -> None:
    assert to_milvus(parse(spec)) == expr


# ---- filtered search --------------------------------------------------------------------------

FILTERS = [
    pytest.param(cmp("meta.topic", "==", "biology"), id="topic"),
    pytest.param(cmp("id", "in", ["doc11", "doc23"]), id="two-ids"),
    pytest.param({"operator": "OR", "conditions": [cmp("meta.year", "<", 2013), cmp("meta.topic", "==", "climate")]},
                 id="or"),
    pytest.param(cmp("meta.topic", "==", "none-such"), id="matches-nothing"),
]


@pytest.mark.parametrize("spec", FILTERS)
@pytest.mark.parametrize("mode", ["search", "bm25_search", "hybrid_search"])
def test_filtered_search_is_the_full_ranking_restricted(built, mode: str, spec: dict) -> None:
    """Not a post-filtered short list: top_k 3 with a filter gives the first 3 matching documents
    of the complete unfiltered ranking."""
    search = getattr(built, mode) if mode != "search" else functools.partial(built.search, mode="dense")
    f = parse(spec)
    full = search([Q], top_k=len(DOCS))[0]
    expected = [h.id for h in full if matches(f, h.id, META[h.id])][:3]
    got = search([Q], top_k=3, filters=spec)[0]
    assert [h.id for h in got] == expected
    if mode != "hybrid_search":  # fused scores depend on the candidate lists, ranks do not
        assert [h.score for h in got] == pytest.approx([h.score for h in full if h.id in expected])


def test_a_selective_filter_still_fills_top_k(built) -> None:
    """Two matching documents that rank near the bottom are still both returned."""
    full = built.search([Q], top_k=len(DOCS), mode="dense")[0]
    tail = [h.id for h in full[-2:]]
    got = built.search([Q], top_k=5, filters=cmp("id", "in", tail), mode="dense")[0]
    assert [h.id for h in got] == tail


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(years=st.sets(st.sampled_from(sorted({m["year"] for m in META.values()})), min_size=1))
def test_bm25_filter_property(built_bm25_full, years: set[int]) -> None:
    built, full = built_bm25_full
    spec = cmp("meta.year", "in", sorted(years))
    got = [h.id for h in built.bm25_search([Q], top_k=4, filters=spec)[0]]
    assert got == [i for i in full if META[i]["year"] in years][:4]


@pytest.fixture
def built_bm25_full(built):
    return built, [h.id for h in built.bm25_search([Q], top_k=len(DOCS))[0]]


def test_filters_through_mcp(mcp_built: MCP) -> None:
    out = mcp_built.ok("retriever_search", {"query_list": [Q], "top_k": 10, "return_metadata": True,
                                            "filters": cmp("meta.year", ">=", 2020)})
    assert out["ret_meta"][0] and all(m["year"] >= 2020 for m in out["ret_meta"][0])
    batch = mcp_built.ok("retriever_hybrid_batch_search", {"batch_query_list": [[Q], [Q, "tides"]], "top_k": 3,
                                                           "filters": cmp("meta.topic", "==", "biology")})
    assert all(i in {"doc00", "doc01", "doc02", "doc28"} for g in batch["ret_ids_ls"] for r in g for i in r)
    message = mcp_built.error("bm25_search", {"query_list": [Q], "filters": cmp("meta.year", "like", 1)})
    assert "unknown operator 'like'" in message and "'not in'" in message
