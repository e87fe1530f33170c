"""The shortcuts a call's path takes (issue 46: our own handling per call) give what the long ways
give: Request.built against model_construct, Hit.rescored against dataclasses.replace, the reply
written from its payload's bytes against the reply as one dict, the reply budget's one-pass bound
against its per-hit count, Request.given against getattr."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from retriever.api import agent, replies
from retriever.api.models import SEARCH_REQUESTS
from retriever.api.registry import TOOLS
from retriever.api.request import Request, _template
from retriever.mcp.core import tool_result
from retriever.types import Hit

REQUESTS = sorted({t.request for t in TOOLS} | set(SEARCH_REQUESTS.values()), key=lambda c: c.__qualname__)


def _state(m: Request) -> tuple[Any, ...]:
    """Everything a pydantic model holds, the fields' order included."""
    return (type(m), list(m.__dict__.items()), m.__pydantic_fields_set__, m.__pydantic_extra__,
            m.__pydantic_private__)


def _values(cls: type[Request], which: int) -> dict[str, Any]:
    """Some of `cls`'s fields with a value of their own: every other one (by `which`), the required
    ones always but when `which` is 2 (model_construct then leaves them unset)."""
    names = list(cls.model_fields)
    out = {n: f"value of {n}" for i, n in enumerate(names) if i % 2 == which % 2}
    if which != 2:
        out |= {n: "required" for n, f in cls.model_fields.items() if f.is_required()}
    return out


@pytest.mark.parametrize("cls", REQUESTS, ids=[c.__qualname__ for c in REQUESTS])
def test_built_is_what_model_construct_builds(cls: type[Request]) -> None:
    for which in range(3):
        values = _values(cls, which)
        assert _state(cls.built(**values)) == _state(cls.model_construct(**values)), which
    assert _state(cls.built(unknown=1)) == _state(cls.model_construct(unknown=1))  # not a field: left out, as there


def test_the_agents_requests_are_built_the_short_way() -> None:
    """The two requests of every agent search take the copy of their defaults, not model_construct."""
    for cls in (agent.SearchRequest, *SEARCH_REQUESTS.values()):
        assert _template(cls) is not False, cls


def test_a_mutable_default_is_built_by_model_construct() -> None:
    class Listed(Request):
        names: list[str] = ["a"]  # noqa: RUF012 (pydantic copies it per instance)

    assert _template(Listed) is False
    one, two = Listed.built(), Listed.built()
    assert one.names == ["a"] and one.names is not two.names


def test_rescored_is_replace() -> None:
    hit = Hit(3, "id", "text", 0.25, {"k": 1}, {"dense": (1, 0.5), "bm25": None}, "other")
    assert hit.rescored(0.75) == dataclasses.replace(hit, score=0.75)
    assert [f.name for f in dataclasses.fields(Hit)] == ["row", "id", "text", "score", "metadata", "sources",
                                                         "collection"]  # a field added: add it to rescored too


PAYLOADS = [
    {"status": "ok"},
    {"results": [{"query": "q", "hits": [{"id": f"d{i}", "text": "word " * 300, "score": 0.5}]} for i in range(5)]},
    {"text": "a lone surrogate \ud800 and NaN", "score": float("nan"), "inf": float("inf")},
    {"nested": {"quote": '"\\\n\t', "unicode": "é€𝄞"}},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=["small", "large", "surrogate", "escapes"])
@pytest.mark.parametrize("structured", [False, True])
def test_reply_bytes_is_the_reply_as_one_dict(payload: dict[str, Any], structured: bool) -> None:
    text, copy = replies.reply(payload, structured)
    as_dict = json.loads(replies.json_bytes(tool_result(text, structured=copy)))
    data = replies.reply_bytes(payload, structured)
    assert json.loads(data) == as_dict
    assert list(json.loads(data)) == list(as_dict)  # the keys in tool_result's order


_TEXT = st.text(max_size=60) | st.sampled_from(["\ud800", "é" * 40, '"' * 10])
_META = st.dictionaries(st.text(max_size=5), st.integers() | st.floats(allow_nan=True) | _TEXT, max_size=3)
_HIT = st.builds(lambda i, t, m: Hit(0, i, t, 0.5, m), _TEXT, _TEXT, _META)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lists=st.lists(st.lists(_HIT, max_size=6), min_size=1, max_size=3), budget=st.integers(0, 2000),
       with_text=st.booleans(), with_meta=st.booleans())
def test_the_budgets_bound_keeps_what_counting_keeps(lists: list[list[Hit]], budget: int, with_text: bool,
                                                    with_meta: bool) -> None:
    fast = replies.fit(lists, budget, with_text, with_meta)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replies, "_bound", lambda *args: math.inf)  # every hit counted, as before the bound
        assert fast == replies.fit(lists, budget, with_text, with_meta)


@pytest.mark.parametrize("name", ["query", "query_list", "collections", "current_user_id", "top_k", "filters"])
def test_given_is_getattr(name: str) -> None:
    for r in (agent.SearchRequest(query="q", top_k=3), SEARCH_REQUESTS["dense"](query_list=["q"])):
        assert r.given(name, "missing") == getattr(r, name, "missing")


def test_disk_stamp_sees_a_manifest_come_and_go(tmp_path: Path) -> None:
    """disk_stamp remembers which manifests were missing, to look for them without an exception: one
    that appears later (a first write's change log, another process's first index) is seen at once,
    and so is one replaced or removed."""
    from retriever.config import load_config
    from retriever.session import disk_stamp
    from retriever.store.persist import MANIFEST
    from retriever.testing.projects import write_project

    cfg = load_config(write_project(tmp_path))
    docs = cfg.paths().docs / MANIFEST
    first = disk_stamp(cfg)
    assert first[0] is None and disk_stamp(cfg) == first  # no change log yet, asked twice
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text("{}")
    appeared = disk_stamp(cfg)
    assert appeared[0] is not None and appeared[1:] == first[1:]
    replacement = docs.with_name("next")
    replacement.write_text("{ }")
    replacement.replace(docs)  # published anew: another inode and size
    replaced = disk_stamp(cfg)
    assert replaced[0] not in (None, appeared[0])
    docs.unlink()
    assert disk_stamp(cfg)[0] is None
