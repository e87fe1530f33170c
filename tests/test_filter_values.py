"""Large `in` filters (issue 45): the values are looked up in a set, so a document costs the same
whatever the list's length; a filter holds at most filters.MAX_VALUES values, more refused before
any document is read, the limit named; a filter's pass over the documents stops when the caller
cancels. Timings are printed (run with -s), not asserted."""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import MCP, copy_built
from retriever.errors import CancelledWork
from retriever.filters import MAX_VALUES, matches, parse
from retriever.security.limits import CANCEL
from retriever.testing.projects import engine_for


@pytest.fixture
def served(built_project: Path, tmp_path: Path) -> MCP:
    return MCP(engine_for(copy_built(built_project, tmp_path / "p")))


def in_filter(count: int, real: list[str]) -> dict:
    return {"field": "id", "operator": "in", "value": real + [str(i) for i in range(count - len(real))]}


def test_a_million_value_in_filter_is_refused_naming_the_limit(served: MCP) -> None:
    t = time.perf_counter()
    err = served.error("search", {"query": "earthquakes", "filters": in_filter(1_000_000, ["doc11"])})
    print(f"1,000,000-value in filter refused in {time.perf_counter() - t:.2f} s", file=sys.stderr)
    assert f"1000000 values in the filter's 'in' / 'not in' lists, the limit is {MAX_VALUES} (filters.MAX_VALUES)" in err
    assert served.ok("search", {"query": "earthquakes", "top_k": 1})["results"][0]["hits"]  # served after it


def test_the_limit_counts_the_lists_of_a_filter_together() -> None:
    half = MAX_VALUES // 2 + 1
    both = {"operator": "OR", "conditions": [in_filter(half, []), {**in_filter(half, []), "operator": "not in"}]}
    with pytest.raises(Exception, match=r"filters\.MAX_VALUES"):
        parse(both)
    parse({"operator": "OR", "conditions": [in_filter(half - 1, []), in_filter(half - 1, [])]})


def test_an_in_filter_at_the_limit_finds_exactly_its_documents(served: MCP) -> None:
    spec = in_filter(MAX_VALUES, ["doc11", "doc05"])
    t = time.perf_counter()
    hits = served.ok("search", {"query": "earthquakes", "mode": "dense", "top_k": 10, "filters": spec})
    print(f"{MAX_VALUES}-value in filter: search answered in {time.perf_counter() - t:.2f} s", file=sys.stderr)
    assert sorted(h["id"] for h in hits["results"][0]["hits"]) == ["doc05", "doc11"]
    excluded = served.ok("search", {"query": "earthquakes", "mode": "dense", "top_k": 30,
                                    "filters": {**spec, "operator": "not in"}})
    assert {h["id"] for h in excluded["results"][0]["hits"]}.isdisjoint({"doc05", "doc11"})


@pytest.mark.parametrize("value, listed, expected", [
    pytest.param(1, [1.0], True, id="int-equals-float"),
    pytest.param(True, [1], False, id="bool-is-not-1"),
    pytest.param(1, [True], False, id="1-is-not-bool"),
    pytest.param("1", [1], False, id="string-is-not-number"),
    pytest.param(None, [None], True, id="null"),
    pytest.param([1], [1], False, id="a-list-equals-no-scalar"),
    pytest.param({"a": 1}, ["a"], False, id="an-object-equals-no-scalar"),
])
def test_in_keeps_json_equality(value: object, listed: list, expected: bool) -> None:
    spec = {"field": "meta.v", "operator": "in", "value": listed}
    assert matches(parse(spec), "d", {"v": value}) is expected
    assert matches(parse({**spec, "operator": "not in"}), "d", {"v": value}) is (not expected)


def test_a_filter_pass_stops_when_the_caller_cancels(built: object) -> None:
    collection = built.searched("search", None).collection  # type: ignore[attr-defined]
    f = parse(in_filter(1000, ["doc11"]))
    event = threading.Event()
    event.set()
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)
    with pytest.raises(CancelledWork, match="filter"):
        ctx.run(collection.mask, f)
    assert collection.mask(f).sum() == 1  # not cancelled: evaluated
