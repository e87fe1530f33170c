"""Issue 47: document-level visibility where Milvus holds the documents (index_backend milvus with
full_text or is_demo, on Milvus Lite 3.2.2 in process, and is_demo on a Milvus 2.3.5 server: the
`milvus_server` marker): the caller's rule is a Milvus expression ANDed into every search, read, count and
delete (indexes/milvus/filters.py `visible`). The 2.3.5 server has no BM25 function (Milvus 2.5 added it)
and refuses full_text at init (test_milvus_fulltext), so there it is the dense collection (is_demo): dense
search, reads by id, counts, deletes, listing, and the expression over every kind of value.

tests/test_visibility.py's case, on a held collection: its planted documents (a hidden best match, a
hidden neighbour chunk, a hidden parent) added by the operator to the sample corpus; every read tool the
server lists is called in each mode the collection serves as a reader of group eng: no reply holds the
hidden documents, while a member of hr sees them through every tool the collection serves. A reader's
page is the visible documents' ranking. A writer grants only the groups it holds and deletes only what
it sees. The expression itself is checked against Rule.sees over every kind of value the field may hold."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import copy_built
from fastmcp import Client
from retriever.indexes.milvus import seen
from retriever.indexes.milvus.filters import visible
from retriever.indexes.milvus.index import MilvusIndex
from retriever.indexes.milvus.store import MilvusStore
from retriever.mcp.server import build_server
from retriever.security.principals import OPERATOR, Principal
from retriever.security.visibility import Rule
from retriever.testing.projects import engine_for
from test_principals import as_principal
from test_visibility import CASES, HR, MODES, PLANTED, READER, UNGRANTED, WEB, WRITER, Q, leaks, listed, reply

SERVED = {"full_text": MODES, "is_demo": ("dense",)}  # the modes each kind of held collection answers
# (kind, where): Milvus Lite in process, or the session's Milvus 2.3.5 server (is_demo only: that server has
# no BM25 function, which Milvus 2.5 added, so no full_text collection there)
HELD = [pytest.param(("full_text", "lite"), id="full_text"), pytest.param(("is_demo", "lite"), id="is_demo"),
        pytest.param(("is_demo", "server"), id="is_demo-server", marks=pytest.mark.milvus_server)]
BACKENDS = [pytest.param("lite", id="lite"), pytest.param("server", id="server", marks=pytest.mark.milvus_server)]
# the read tools that reach the documents, per kind: a member of hr sees the planted ones through each
NEEDS_BM25 = {"bm25_search", "retriever_hybrid_search", "retriever_hybrid_batch_search"}
SHOWN = {name for name, (_, shows) in CASES.items() if shows}


def uri_of(request: pytest.FixtureRequest, where: str, dest: Path) -> str:
    """Milvus Lite's file under `dest`, or the session's Milvus server."""
    return str(dest / "milvus.db") if where == "lite" else request.getfixturevalue("milvus_server_uri")


def held_project(built_project: Path, dest: Path, kind: str, corpus: bool = True, uri: str | None = None) -> Path:
    """A copy of the built sample project whose documents Milvus holds (`kind`: full_text or is_demo; at
    `uri`, Milvus Lite under `dest` by default), visibility on as in test_visibility (field acl, missing
    public), the sample corpus indexed into Milvus (`corpus`) and the planted documents added by the operator."""
    config = copy_built(built_project, dest)
    cfg = yaml.safe_load(config.read_text())
    cfg["index_backend"] = "milvus"
    cfg["index_backend_configs"]["milvus"] = {"uri": uri or str(dest / "milvus.db"),
                                              **({"full_text": True} if kind == "full_text" else {})}
    cfg["is_demo"] = kind == "is_demo"
    cfg["collection_name"] = f"vis_{kind}_{uuid.uuid4().hex[:8]}"
    cfg.setdefault("security", {})["visibility"] = {"field": "acl", "missing": "public"}
    config.write_text(yaml.safe_dump(cfg))
    engine = engine_for(config)
    engine.init()
    if corpus:
        engine.index()
    engine.add(PLANTED)
    return config


@pytest.fixture(scope="module", params=HELD)
def held(request: pytest.FixtureRequest, built_project: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Any]]:
    """(kind, collection name, MCP server) of a held collection with the planted documents."""
    kind, where = request.param
    dest = tmp_path_factory.mktemp(f"vis_{kind}_{where}") / "p"
    config = held_project(built_project, dest, kind, uri=uri_of(request, where, dest))
    engine = engine_for(config)
    engine.init()
    yield kind, engine.config.collection_name, build_server(engine, profile="full")


def cases(collection: str) -> dict[str, tuple[list[dict[str, Any]], bool]]:
    """test_visibility's calls, fan-out naming this collection; those of modes the kind does not serve
    stay in (each must leak nothing, refused or not) but are not expected to show hr its documents."""
    fanout = [{"query_list": [Q], "collections": [collection], "top_k": 3, "mode": m} for m in MODES]
    return {**CASES, "retriever_fanout_search": (fanout, True)}


def serves(kind: str, tool: str, args: dict[str, Any]) -> bool:
    """Whether the held collection of `kind` answers the call (is_demo ranks dense only)."""
    if kind == "full_text":
        return True
    return tool not in NEEDS_BM25 and args.get("mode", "dense" if tool != "search" else "hybrid") == "dense"


def test_every_read_tool_hides_the_planted_best_match_from_a_reader(held: tuple[str, str, Any]) -> None:
    kind, collection, server = held
    names = listed(server, READER) - WEB
    new = sorted(names - set(CASES))
    assert not new, f"read tools without a visibility case in test_visibility: {new} (add them to CASES)"
    found: dict[str, list[bool]] = {}
    for name, (calls, shows) in sorted(cases(collection).items()):
        if name not in names:
            continue
        for args in calls:
            assert leaks(reply(server, READER, name, args)) == [], (kind, name, args)
            if shows and serves(kind, name, args):
                found.setdefault(name, []).append(bool(leaks(reply(server, HR, name, args))))
    # a member of hr sees the planted documents through every document tool the collection serves
    assert {name: any(seen) for name, seen in found.items()} == {name: True for name in found}
    assert set(found) == {n for n in SHOWN if kind == "full_text" or n not in NEEDS_BM25}


def page(server: Any, principal: Principal, mode: str, k: int, offset: int = 0) -> list[str]:
    async def run() -> Any:
        async with Client(server) as client:
            result = await client.call_tool("retriever_search" if mode == "dense" else
                                            "bm25_search" if mode == "bm25" else "retriever_hybrid_search",
                                            {"query_list": [Q], "top_k": k, "offset": offset, "return_metadata": False},
                                            raise_on_error=False)
            assert not result.is_error, result.content[0].text
            return result.structured_content or json.loads(result.content[0].text)

    return as_principal(principal, run)["ret_psg"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_s_page_is_the_visible_documents_ranking(held: tuple[str, str, Any], mode: str) -> None:
    kind, _, server = held
    if mode not in SERVED[kind]:
        pytest.skip(f"a {kind} collection does not rank {mode}")
    psg = page(server, OPERATOR, mode, 8)
    assert "qq7hidden" in psg[0], "the planted document is the operator's best match"
    visible = [t for t in psg if "qq7hidden" not in t]
    assert page(server, READER, mode, 3) == visible[:3]  # a full page, no hidden row in the ranking
    assert page(server, READER, mode, 2, offset=1) == visible[1:3]  # offsets count visible documents only


def test_counts_tell_nothing_of_hidden_documents(held: tuple[str, str, Any]) -> None:
    _, _, server = held
    listing = reply(server, READER, "retriever_list_collections", {})
    assert '"documents": null' in listing or '"documents":null' in listing


def planted_only(request: pytest.FixtureRequest, built_project: Path, dest: Path) -> Any:
    """An MCP server of a held collection of the planted documents only (request.param: HELD's)."""
    kind, where = request.param
    engine = engine_for(held_project(built_project, dest, kind, corpus=False, uri=uri_of(request, where, dest)))
    engine.init()
    return build_server(engine, profile="full")


@pytest.fixture(params=HELD)
def writable(request: pytest.FixtureRequest, built_project: Path, tmp_path: Path) -> Any:
    """A held collection of the planted documents only, for the tests that write."""
    return planted_only(request, built_project, tmp_path / "p")


@pytest.fixture(scope="module", params=HELD)
def refusing(request: pytest.FixtureRequest, built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One such collection per kind for the writes that are refused (each checks that it wrote nothing)."""
    return planted_only(request, built_project, tmp_path_factory.mktemp("vis_refusing") / "p")


@pytest.mark.parametrize(("args", "said"), UNGRANTED)
def test_a_writer_cannot_grant_what_it_does_not_hold(refusing: Any, args: dict[str, Any], said: str) -> None:
    text = reply(refusing, WRITER, "add_documents", args)
    assert said in text and "security.visibility" in text
    assert "'x'" not in reply(refusing, HR, "get_document", {"ids": ["hb-1", "n1"]})  # nothing was written


def test_a_writer_deletes_and_counts_only_what_it_sees(writable: Any) -> None:
    added = json.loads(reply(writable, WRITER, "retriever_add",
                             {"documents": [{"id": "mine", "contents": "eng note", "acl": ["eng"]}]}).split("}{")[0] + "}")
    seen = sum(1 for d in [*PLANTED, {"acl": ["eng"]}] if READER_RULE.sees(d))
    assert added["added"] == 1 and added["documents"] == seen  # of the documents it sees, not all 8
    gone = json.loads(reply(writable, WRITER, "retriever_delete", {"ids": ["hb-1", "mine"]}).split("}{")[0] + "}")
    assert gone["deleted"] == 1 and gone["not_found"] == ["hb-1"] and gone["documents"] == seen - 1
    # by filter: the source's visible chunk goes, its hidden one stays
    pub = json.loads(reply(writable, WRITER, "retriever_delete",
                           {"filters": {"field": "meta.source_id", "operator": "==", "value": "pub"}}).split("}{")[0] + "}")
    assert pub["deleted"] == 1
    kept = reply(writable, HR, "get_document", {"ids": ["hb-1", "pub:0", "pub:1"]})
    assert "qq7hidden" in kept and "second part" in kept and "first part" not in kept


# ---- the expression against Rule.sees, over every kind of value the field may hold -------------------

VALUES: dict[str, Any] = {
    "eng": "eng", "hr": "hr", "star": "*", "list-eng": ["hr", "eng"], "list-hr": ["hr"], "list-star": ["*"],
    "quoted": 'e"g', "empty-string": "", "number": 5, "bool": True, "object": {"eng": 1}, "empty-list": [],
    "null": None, "mixed-eng": ["eng", 5], "mixed-hr": ["hr", 5], "nested": [["eng"]],
}
ODD = {"mixed-eng", "mixed-hr", "nested"}  # lists holding a non-string: Milvus reads them otherwise (filters.visible)
READER_RULE = Rule("acl", "public", frozenset({"eng"}), "reader")
RULES = [pytest.param(Rule("acl", missing, frozenset(groups)), id=f"{missing}-{'+'.join(sorted(groups)) or 'none'}")
         for missing in ("hidden", "public") for groups in ({"eng"}, set(), {"eng", "hr", 'e"g'})]


@pytest.fixture(scope="module", params=BACKENDS)
def planted_values(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusIndex]:
    """Each kind of value in the field, in a collection of Milvus Lite or of the Milvus 2.3.5 server."""
    uri = uri_of(request, request.param, tmp_path_factory.mktemp("vis_expr"))
    store = MilvusStore(uri, None, f"acl_values_{uuid.uuid4().hex[:8]}")
    store.create(2, {"dimension": 2})
    metas = [{"acl": v, "n": i} for i, v in enumerate(VALUES.values())] + [{"n": -1}]
    store.upsert([*VALUES, "no-field"], np.ones((len(metas), 2), dtype=np.float32), ["t"] * len(metas), metas)
    yield MilvusIndex(store, None, {"dimension": 2})
    store.drop()
    store.close()


@pytest.mark.parametrize("rule", RULES)
def test_the_expression_sees_what_rule_sees(planted_values: MilvusIndex, rule: Rule) -> None:
    names = [*VALUES, "no-field"]
    python = {n for n in names if rule.sees({"acl": VALUES[n]} if n in VALUES else {})}
    milvus = set(planted_values.store.matching(visible(rule)))
    assert milvus - ODD == python - ODD  # every well-formed value (and none) read alike
    shown = {d.id for d in planted_values.get(names, rule)}  # the expression, then Rule.sees
    assert shown - ODD == python - ODD and shown <= python  # an odd list is never shown where Python hides it
    hits = planted_values.search_hits(np.ones((1, 2), dtype=np.float32), len(names), rule=rule)[0]
    assert {h.id for h in hits} == shown and planted_values.count(rule) == len(milvus)


# ---- reading every row the expression matches, page by page (indexes/milvus/seen.py `paged`) -----------

# ids whose byte order differs from their insertion order, with characters an expression must escape
PAGED_IDS = [f"p{i}" for i in range(50)] + ['q"uote', "back\\slash", "é-accent", "Z", "10", "9", "a b", "日本"]


# (PAGE, FIRST_PAGE, PAGE_BYTES): pages of 5 (the last one short), of 38 (a full page, then an empty one),
# one page (the defaults), and a first page of 4 that the rows' size lets grow
PAGES = [(5, 256, 32 << 20), (38, 256, 32 << 20), (seen.PAGE, seen.FIRST_PAGE, seen.PAGE_BYTES), (1000, 4, 60)]


@pytest.mark.parametrize("where", BACKENDS)
def test_a_paged_read_reads_every_matching_row_once(request: pytest.FixtureRequest, tmp_path: Path, where: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule's 38 of 58 rows, written in two batches, read in pages smaller than them, of their number and
    larger: each row once (Milvus Lite orders a page by key only with the `iterator` flag: without it,
    pages of 5 missed 30 rows there); a page after the first is sized by the rows read."""
    store = MilvusStore(uri_of(request, where, tmp_path), None, f"paged_{uuid.uuid4().hex[:8]}")
    store.create(2, {"dimension": 2})
    try:
        metas = [{"acl": "eng" if i % 3 else ["hr"]} for i in range(len(PAGED_IDS))]
        for part in (slice(0, 29), slice(29, None)):
            ids = PAGED_IDS[part]
            store.upsert(ids, np.ones((len(ids), 2), dtype=np.float32), ["t"] * len(ids), metas[part])
        want = sorted(i for i, m in zip(PAGED_IDS, metas) if m["acl"] == "eng")
        assert len(want) == 38
        limits: list[int] = []
        read_ = store._read
        monkeypatch.setattr(store, "_read", lambda *a, **k: limits.append(k["limit"]) or read_(*a, **k))
        for page, first, size in PAGES:
            monkeypatch.setattr(seen, "PAGE", page)
            monkeypatch.setattr(seen, "FIRST_PAGE", first)
            monkeypatch.setattr(seen, "PAGE_BYTES", size)
            limits.clear()
            read = [row["id"] for row in seen.paged(store, visible(Rule("acl", "hidden", frozenset({"eng"}))), [])]
            assert sorted(read) == want, (page, first, size)
            assert limits[0] == min(page, first) and len(limits) == {5: 8, 38: 2, 1000: 3}.get(page, 1), limits
    finally:
        store.drop()
        store.close()
