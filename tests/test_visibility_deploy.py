"""Issue 47: document-level visibility on the deploy service (`retriever deploy`: service/app.py, and
batcher.py, which carries each caller's principal to the compute thread), over real HTTP on 127.0.0.1.

One service over test_visibility's project (security.visibility on; a hidden document planted as the best
match of the query, a hidden neighbour chunk, a hidden auto-merge parent) with three tokens: the operator's
plain token (test_deploy's), a reader of group eng and a member of hr (static principals, read scope).
The reader never gets the hidden documents' ids, texts or metadata from /search in each mode, any
/tools/<tool>, the mounted /mcp, /metrics or /readyz, while hr gets them; its /search is a search of the
visible documents alone (the same ids and scores as the operator's over a project built from only
those); a reader's and the operator's searches sent at once are never served as one batch."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from retriever.service.app import READ_TOOLS
from retriever.testing.projects import SAMPLE
from test_deploy import QUERIES, TOKEN, Deploy
from test_visibility import CASES, MODES, PLANTED, TOKENS, Q, _session, leaks, visibility_project, with_principals
from test_visibility_scores import built, project

HIDDEN = [d["id"] for d in PLANTED if d["acl"] != "*"]


@pytest.fixture(scope="module")
def service(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    folder = tmp_path_factory.mktemp("vis-deploy")
    d = Deploy(with_principals(visibility_project(built_project, folder / "p")), folder, mcp=True)
    yield d
    d.stop()
    assert not [t for t in TOKENS.values() if t in d.log_path.read_text()]


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample corpus and the planted documents everyone sees, indexed from scratch: what a reader's
    searches must equal (test_visibility_scores shows the library's reader gets this; here, the service's)."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    return built(project(tmp_path_factory.mktemp("vis-alone") / "y", sample + [d for d in PLANTED if d["acl"] == "*"]))


def post(service: Deploy, who: str, path: str, body: dict[str, Any]) -> httpx.Response:
    token = TOKEN if who == "operator" else TOKENS[who]
    return httpx.post(service.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=120)


def ok(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text[:500]
    return dict(reply.json())


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_s_search_is_a_search_of_the_visible_documents_alone(service: Deploy, alone: Any, mode: str) -> None:
    queries = [Q, "zebrafinch notes", *QUERIES[:3]]
    body = {"query_list": queries, "top_k": 8, "mode": mode, "return_metadata": True}
    assert ok(post(service, "operator", "/search", body))["ret_ids"][0][0] == "hb-1"  # the planted best match
    assert ok(post(service, "hr", "/search", body))["ret_ids"][0][0] == "hb-1"
    got = ok(post(service, "reader", "/search", body))
    assert leaks(json.dumps(got)) == [] and not set(HIDDEN) & {i for ids in got["ret_ids"] for i in ids}
    want = alone.search(queries, 8, mode=mode)
    assert got["ret_ids"] == [[h.id for h in hits] for hits in want]
    for scores, hits in zip(got["ret_scores"], want):
        assert scores == pytest.approx([h.score for h in hits], abs=1e-5)
    paged = ok(post(service, "reader", "/search", {**body, "top_k": 2, "offset": 1}))
    assert paged["ret_ids"] == [ids[1:3] for ids in got["ret_ids"]]  # offsets count the visible documents


def test_no_tool_at_tools_gives_a_reader_the_hidden_documents(service: Deploy) -> None:
    """Every read tool the service serves (READ_TOOLS; a new one fails here until test_visibility.CASES has
    it), in each of its cases: the reader's reply never holds a hidden document, hr's does (document tools)."""
    assert not sorted(set(READ_TOOLS) - set(CASES)), "a read tool without a visibility case (test_visibility.CASES)"
    seen: dict[str, bool] = {}
    for name in sorted(READ_TOOLS):
        calls, shows = CASES[name]
        for args in calls:
            reply = post(service, "reader", f"/tools/{name}", args)
            assert reply.status_code < 500 and leaks(reply.text) == [], (name, args, reply.status_code)
            asked = json.dumps(args)  # a hidden id the call names comes back as a missing one's would
            text = re.sub(r'"parent_id": ?"par-x"', "", reply.text)  # visible kids' own metadata names it
            assert not [i for i in HIDDEN if f'"{i}"' in text and f'"{i}"' not in asked], (name, args)
            if shows:
                seen[name] = seen.get(name, False) or bool(leaks(post(service, "hr", f"/tools/{name}", args).text))
    assert seen == {name: True for name in seen} and "search" in seen and "get_document" in seen


def test_a_hidden_id_answers_as_a_missing_one(service: Deploy) -> None:
    hidden = post(service, "reader", "/tools/get_document", {"ids": ["hb-1"]})
    missing = post(service, "reader", "/tools/get_document", {"ids": ["zz-none"]})
    assert (hidden.status_code, hidden.text.replace("hb-1", "zz-none")) == (missing.status_code, missing.text)
    assert "qq7hidden" in post(service, "hr", "/tools/get_document", {"ids": ["hb-1"]}).text


def test_counts_and_status_tell_nothing_of_hidden_documents(service: Deploy) -> None:
    listing = {who: ok(post(service, who, "/tools/retriever_list_collections", {}))["collections"][0]["documents"]
               for who in ("reader", "operator")}
    assert listing == {"reader": None, "operator": 30 + len(PLANTED)}
    ready = httpx.get(f"{service.url}/readyz", timeout=30).json()  # no token: which indexes, no sizes
    assert ready["status"] == "ready" and ready["dense_index"] is True and ready["bm25_index"] is True
    metrics = httpx.get(f"{service.url}/metrics", headers={"Authorization": f"Bearer {TOKENS['reader']}"}, timeout=30)
    assert metrics.status_code == 200 and leaks(metrics.text) == [] and "hb-1" not in metrics.text


def test_the_mounted_mcp_endpoint_hides_them_too(service: Deploy) -> None:
    calls = [("search", {"query": Q, "top_k": 3, "mode": m}) for m in MODES] + [("get_document", {"ids": HIDDEN})]
    got = {who: asyncio.run(_session(f"{service.url}/mcp", TOKENS[who], calls)) for who in ("reader", "hr")}
    assert [leaks(t) for t in got["reader"]] == [[]] * len(calls)
    assert all(leaks(t) for t in got["hr"])


def test_a_reader_and_the_operator_at_once_are_never_one_batch(service: Deploy) -> None:
    """Same queries, same options, sent at once by both: the batcher merges each caller's own requests
    (fewer batches than requests), never the two callers', so the reader's are its own ranking."""
    body = {"query_list": [Q], "top_k": 3, "mode": "dense"}
    own = ok(post(service, "reader", "/search", body))["ret_ids"]
    before = service.metric("retriever_batch_requests_count")
    who = ["reader", "operator"] * 12
    start = threading.Barrier(len(who))

    def one(caller: str) -> dict[str, Any]:
        start.wait()
        return ok(post(service, caller, "/search", body))

    with ThreadPoolExecutor(len(who)) as pool:
        replies = list(pool.map(one, who))
    assert [r["ret_ids"] for r, w in zip(replies, who) if w == "reader"] == [own] * 12
    assert all(r["ret_ids"][0][0] == "hb-1" for r, w in zip(replies, who) if w == "operator")
    assert service.metric("retriever_batch_requests_count") - before < len(who)  # requests were merged
