"""Issue 47: a document whose `acl` excludes a principal never reaches it by any read tool, in any mode: a
property test (security.visibility, security/visibility.py).

The tools under test come from the registry (api/registry.py): every tool a profile lists whose effects are
read-only, for each profile (agent, ultrarag, full), in each mode its own schema offers. A read tool without
a KIND here fails (test_a_read_tool_the_registry_gains_fails_here_until_it_has_a_kind plants one).

Two worlds are built the same way from the sample project, with security.visibility on, a learned-sparse
model (a random tiny MLM, sparse fused into hybrid), an LLM (retriever.testing.fake_llm: its judge echoes
the first passage it is shown as what is missing, its rewrite turns that into the next round's query, so
whatever the LLM is shown comes back in the reply) and a graph of triples: `planted` holds hidden documents
(acl [hr]) planted as the best match of the queries in every mode (hb-1 for dense, BM25 and hybrid; hs-1,
the longest text, for the sparse model, whose random weights rank the longest text first), a hidden
neighbour chunk and a hidden auto-merge parent; `alone` holds the same documents less the hidden ones.
Each profile is served over each world (`serve --ultrarag`'s engine for ultrarag). Per tool and mode:

- the operator's call of the planted world shows a hidden document (the case reaches it; a listing counts
  it), except where nothing can: the LLM-only tools read no document (their prompts hold none), and
  retriever_deploy_search's deployed retriever is not run here;
- for arguments hypothesis draws from the tool's listed schema (queries, ids, top_k, offset, the reply
  budget, windows, auto-merge, filters, LLM reranking, ...), a reader of group eng gets from the planted
  world exactly what it gets from `alone` (floats to 1e-5): no hit, count, next_offset, score, warning or
  error tells it the hidden documents exist; no reply holds a hidden document's id (one the call itself
  names aside), its text or its tokens; no LLM prompt on its behalf holds them either;
- the tools that cannot apply visibility (api/grants.py UNSEEING) refuse the reader, naming
  security.visibility and nothing hidden.

The same over a pair of worlds whose documents Milvus holds (`held`: Milvus Lite, index_backend milvus with
full_text, its BM25 analysed by bm25s, the sparse model's vectors in Milvus too): every tool and mode above
serves such a collection (the reader's BM25 and hybrid scores come from indexes/milvus/seen.py, over the
documents it sees), so the same cases run, their floats equal (HELD_TOLERANCE). The collection is named
user_default, the collection UltraRAG's project memory search reads (current_user_id left out), so that tool
runs in every profile there; fan-out names it."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_built
from fastmcp import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from retriever import Retriever
from retriever.api import registry
from retriever.api.grants import UNSEEING
from retriever.api.models import ExtractTriplesRequest
from retriever.api.tool import Tool
from retriever.api.ultrarag import ultrarag_overrides
from retriever.config import load_config
from retriever.mcp.server import build_server
from retriever.security.principals import OPERATOR, Principal
from retriever.testing.fake_llm import FakeLLM
from retriever.testing.projects import SAMPLE, engine_for
from test_principals import as_principal
from test_sparse import build_tiny_mlm
from test_visibility import PLANTED, READER, Q

SAMPLE_DOCS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
# hs-1: the sparse model's best match (its weights are random: the longest text wins); also in dense,
# BM25 and hybrid candidates, never first there
LONG = {"id": "hs-1", "contents": f"{Q}, qq7hidden: " + " ".join(d["contents"] for d in SAMPLE_DOCS), "acl": ["hr"]}
DOCS = [*PLANTED, LONG]
HIDDEN = [d for d in DOCS if d["acl"] != "*"]
VISIBLE = [d for d in DOCS if d["acl"] == "*"]
TOKENS = ("qq7hidden", "mauvelemur")  # in every hidden document's text or metadata
# a hidden id is not told: but par-x is named by its visible children's own metadata (parent_id)
HIDDEN_IDS = [d["id"] for d in HIDDEN if not any(d["id"] in json.dumps(v) for v in VISIBLE)]
QUERIES = (Q, "zebrafinch dawn", "second part of the notes", "what causes earthquakes")
ID_POOL = ("pub:0", "hb-1", "kid:a", "pub:1", "par-x", "hs-1", "pub", "doc01", "nope")
N_DOCS = len(SAMPLE_DOCS) + len(DOCS)

# Every read tool of the registry, by what it does with documents:
#   search: finds them by a query; read: by id; list: counts them per collection; llm: sends the query to
#   the LLM only (reads no document); refused: refused to a restricted caller (api/grants.py UNSEEING);
#   web: the web's pages, not the collection's documents (not run here)
KIND = {
    "search": "search", "retriever_search": "search", "retriever_batch_search": "search",
    "retriever_hybrid_search": "search", "retriever_hybrid_batch_search": "search", "bm25_search": "search",
    "retriever_multi_query_search": "search", "retriever_fanout_search": "search",
    "retriever_project_memory_search": "search", "retriever_agentic_search": "search",
    "get_document": "read", "retriever_get_neighbors": "read",
    "list_collections": "list", "retriever_list_collections": "list",
    "retriever_rewrite_query": "llm", "retriever_infer_filters": "llm",
    "retriever_graph_search": "refused", "retriever_deploy_search": "refused",
    "web_search": "web", "retriever_exa_search": "web", "retriever_tavily_search": "web",
    "retriever_zhipuai_search": "web", "retriever_websearch": "web", "retriever_batch_websearch": "web",
}
# (profile, tool) the local worlds cannot serve, and why (the held worlds serve every case)
UNSERVED = {("full", "retriever_project_memory_search"): "it needs Milvus outside `serve --ultrarag`; the "
            "ultrarag profile's case runs it"}
HELD_COLLECTION = "user_default"  # the held worlds' collection: the one project memory search reads by default
# floats of a reader's two replies: to 1e-5 over the local worlds; equal over the held ones, where each score is
# computed alike in both (Milvus's dense and learned-sparse inner products of the same vectors, BM25 by
# indexes/milvus/seen.py over the same visible documents' terms, fusions of those): all 1,572 floats of the held
# cases' replies were equal to the bit once the visible documents were written apart (see world)
HELD_TOLERANCE = 0.0


def read_tools(tools: tuple[Tool, ...] | list[Tool] = registry.TOOLS) -> dict[str, list[Tool]]:
    """Per profile, the read-only tools it lists."""
    return {p: [t for t in tools if p in t.profiles and t.effects.read_only] for p in registry.PROFILES}


def uncovered(tools: tuple[Tool, ...] | list[Tool] = registry.TOOLS) -> list[str]:
    return sorted({t.name for listed in read_tools(tools).values() for t in listed} - set(KIND))


def modes_of(schema: dict[str, Any]) -> list[str | None]:
    mode = schema.get("properties", {}).get("mode")
    if not mode:
        return [None]
    return [m for option in mode.get("anyOf", [mode]) for m in option.get("enum", [])]


CASES = [pytest.param(p, t.name, m, id=f"{p}-{t.name}" + (f"-{m}" if m else ""))
         for p, listed in read_tools().items() for t in listed if KIND.get(t.name) != "web"
         for m in modes_of(t.request.model_json_schema())]


# ---- the worlds ------------------------------------------------------------------------------------

def respond(prompt: str) -> str:
    """The fake LLM: each template (llm/prompts.py) answered from what the prompt shows it."""
    passages = re.findall(r"^\[\d+\] (.*)$", prompt, flags=re.M)
    if prompt.startswith("Do the passages"):  # judge: never enough; what is missing is the first passage
        return json.dumps({"sufficient": False, "confidence": 0.2, "missing": passages[0] if passages else "more"})
    if prompt.startswith("Rewrite"):  # the missing passage, else the query and one word more
        missed = re.search(r"The last search missed: (.*)\.\n", prompt)
        query = re.search(r"^Query: (.*)$", prompt, flags=re.M)
        return json.dumps({"queries": [missed.group(1) if missed else f"{query.group(1) if query else ''} again"]})
    if prompt.startswith("Rank"):
        return json.dumps({"order": list(range(len(passages), 0, -1))})
    if prompt.startswith("Score"):
        return json.dumps({"scores": [len(p) % 11 for p in passages]})
    if prompt.startswith("Extract"):
        words = re.findall(r"[a-z0-9]+", prompt.split("Text: ", 1)[1].split("\nAnswer", 1)[0].lower())
        return json.dumps({"triples": [[words[0], "mentions", words[-1]]] if len(words) > 1 else []})
    return json.dumps({"filter": {"field": "meta.acl", "operator": "==", "value": "*"}})


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM(respond)
    yield fake
    fake.stop()


def world(built_project: Path, dest: Path, docs: list[dict[str, Any]], mlm: Path, llm: FakeLLM,
          held: bool = False) -> Path:
    """The sample project plus `docs`; `held`: in a full_text collection of Milvus Lite (its own file under
    `dest`), the sample corpus indexed into it, its sparse vectors written with each document."""
    config = copy_built(built_project, dest)
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("security", {})["visibility"] = {"field": "acl", "missing": "public"}
    cfg["sparse"] = {"model_name_or_path": str(mlm), "save_path": "out/sparse", "hybrid": "fused"}
    cfg["llm"] = {"base_url": llm.url, "model": "tiny-judge", "api_key": "k", "timeout": 10, "max_retries": 0}
    cfg["retriever_url"] = "http://127.0.0.1:9"  # lists retriever_deploy_search (the reader is refused first)
    if held:  # as tests/test_visibility_held.py's full_text collection
        cfg["index_backend"] = "milvus"
        cfg["index_backend_configs"]["milvus"] = {"uri": str(dest / "milvus.db"), "full_text": True}
        cfg["collection_name"] = HELD_COLLECTION
    config.write_text(yaml.safe_dump(cfg))
    engine = engine_for(config)
    engine.init()
    if held:
        engine.index()
    else:
        engine.sparse_index()
    # the visible documents in a write of their own, the hidden ones (if any) in the next: a document's learned-sparse
    # weights depend on the others encoded in its batch (padded to its longest text: measured, up to 1.2e-7 in a
    # weight, one float32 ulp in a Milvus score), so written together with hs-1 the visible ones are stored otherwise
    engine.add([d for d in docs if d["acl"] == "*"])
    if hidden := [d for d in docs if d["acl"] != "*"]:
        engine.add(hidden)
    assert not registry.call(engine, ExtractTriplesRequest())["failed"]
    return config


def ultrarag(config: Path) -> Retriever:
    """The engine `serve --ultrarag` makes of `config` (tests/test_client_reach.py's)."""
    backend = load_config(config).index_backend
    engine = Retriever(load_config(config, ultrarag_overrides(config.parent, backend, [])), config.parent)
    engine.ultrarag = True
    return engine


@dataclass
class Worlds:
    servers: dict[tuple[str, str], Any]  # (world, profile) -> MCP server
    schemas: dict[str, dict[str, dict[str, Any]]]  # profile -> tool -> input schema, as the operator is listed
    collection: str  # the collection's name, as fan-out names it
    unserved: dict[tuple[str, str], str]  # (profile, tool) these worlds cannot serve, and why


@pytest.fixture(scope="module")
def mlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_mlm(tmp_path_factory.mktemp("mlm") / "tiny-mlm")


def build_sparser_mlm(folder: Path) -> Path:
    """The tiny MLM whose vectors hold only the words of this test's texts and queries (its output bias
    -1000 for every other token): about 450 weights a vector instead of the whole vocabulary's 30,000, over
    which Milvus Lite's sparse search took about 200 ms a query (here, a hybrid or sparse search: 25 ms)."""
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    build_tiny_mlm(folder)
    tokenizer, model = AutoTokenizer.from_pretrained(str(folder)), BertForMaskedLM.from_pretrained(str(folder))
    texts = [d["contents"] for d in [*SAMPLE_DOCS, *DOCS]] + list(QUERIES)
    used = {i for ids in tokenizer(texts)["input_ids"] for i in ids} - set(tokenizer.all_special_ids)
    with torch.no_grad():
        bias = model.cls.predictions.bias
        other = torch.ones_like(bias, dtype=torch.bool)
        other[sorted(used)] = False
        bias[other] = -1000.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def worlds(built_project: Path, llm: FakeLLM, mlm: Path, tmp_path_factory: pytest.TempPathFactory) -> Worlds:
    return pair(built_project, llm, mlm, tmp_path_factory, held=False)


@pytest.fixture(scope="module")
def held_worlds(built_project: Path, llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Worlds:
    sparser = build_sparser_mlm(tmp_path_factory.mktemp("mlm") / "sparser-mlm")
    return pair(built_project, llm, sparser, tmp_path_factory, held=True)


def pair(built_project: Path, llm: FakeLLM, mlm: Path, tmp_path_factory: pytest.TempPathFactory, held: bool) -> Worlds:
    """The planted and the alone world, each served in every profile."""
    servers = {}
    for name, docs in (("planted", DOCS), ("alone", VISIBLE)):
        dest = tmp_path_factory.mktemp(f"{name}_held" if held else name) / "p"
        config = world(built_project, dest, docs, mlm, llm, held)
        full, ultra = engine_for(config), ultrarag(config)
        full.init()
        ultra.init()
        servers |= {(name, "agent"): build_server(full, profile="agent"),
                    (name, "full"): build_server(full, profile="full"), (name, "ultrarag"): build_server(ultra, ultrarag=True)}
    schemas = {p: as_principal(OPERATOR, lambda s=servers["planted", p]: _schemas(s)) for p in registry.PROFILES}
    return Worlds(servers, schemas, HELD_COLLECTION if held else "", {} if held else UNSERVED)


async def _schemas(server: Any) -> dict[str, dict[str, Any]]:
    async with Client(server) as client:
        return {t.name: t.input_schema for t in await client.list_tools()}


@dataclass(frozen=True)
class Reply:
    error: bool
    texts: list[str]
    structured: Any

    @property
    def whole(self) -> str:
        return "".join(self.texts) + json.dumps(self.structured)


def calls(principal: Principal, servers: list[Any], tool: str, args: dict[str, Any]) -> list[Reply]:
    """The same call of `tool` on each server, as `principal`, each through its own in-memory MCP client."""
    async def run() -> list[Reply]:
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(s)) for s in servers]
            out = []
            for client in clients:
                r = await client.call_tool(tool, args, raise_on_error=False)
                out.append(Reply(r.is_error, [getattr(c, "text", "") for c in r.content], r.structured_content))
            return out

    return list(as_principal(principal, run))


# ---- what a reply may not hold, and what it must equal ---------------------------------------------

def hidden_in(text: str, args: dict[str, Any]) -> list[str]:
    """The hidden documents' tokens, texts and ids in `text` (an id the call names itself aside)."""
    named = json.dumps(args)
    return ([t for t in TOKENS if t in text] + [d["id"] for d in HIDDEN if d["contents"] in text]
            + [i for i in HIDDEN_IDS if i in text and i not in named])


def differs(got: Any, want: Any, at: str = "", tol: float = 1e-5) -> str | None:
    """Where `got` and `want` differ (floats to `tol`, relative or absolute; 0: equal), or None."""
    if isinstance(got, float) or isinstance(want, float):
        ok = isinstance(got, (int, float)) and isinstance(want, (int, float)) and math.isclose(got, want, rel_tol=tol,
                                                                                               abs_tol=tol)
        return None if ok else f"{at}: {got!r} != {want!r}"
    if isinstance(got, dict) and isinstance(want, dict):
        if set(got) != set(want):
            return f"{at}: keys {sorted(got)} != {sorted(want)}"
        return next((d for k in got if (d := differs(got[k], want[k], f"{at}.{k}", tol))), None)
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{at}: {len(got)} items != {len(want)}: {str(got)[:300]} != {str(want)[:300]}"
        return next((d for i, (g, w) in enumerate(zip(got, want)) if (d := differs(g, w, f"{at}[{i}]", tol))), None)
    if isinstance(got, str) and isinstance(want, str) and got[:1] in "{[" and got != want:
        try:
            return differs(json.loads(got), json.loads(want), at, tol)
        except ValueError:
            pass
    return None if got == want else f"{at}: {repr(got)[:300]} != {repr(want)[:300]}"


# ---- arguments from the tool's own schema ----------------------------------------------------------

ONLY_HIDDEN = {"field": "meta.tag", "operator": "!=", "value": "x"}  # only hidden documents have a tag
OPTIONS: dict[str, st.SearchStrategy[Any]] = {  # an option left out takes its default
    "top_k": st.integers(1, 8), "offset": st.integers(1, 3), "window": st.just(1), "auto_merge": st.just(0.4),
    "max_bytes": st.sampled_from([300, 1200, 0]), "max_chars": st.just(24), "return_metadata": st.just(True),
    "return_text": st.just(False), "scale_score": st.just(True), "score_threshold": st.just(0.3),
    "candidate_depth": st.integers(1, 4), "fusion": st.sampled_from(["rrf", "convex"]), "vector_weight": st.just(0.3),
    "filters": st.sampled_from([ONLY_HIDDEN, {"field": "meta.acl", "operator": "==", "value": "*"},
                                {"field": "id", "operator": "in", "value": ["hb-1", "kid:a", "doc11"]}]),
    "llm_rerank": st.sampled_from([{"method": "listwise", "depth": 6, "batch_size": 4},
                                   {"method": "pointwise", "depth": 6, "batch_size": 4}]),
    "around": st.integers(1, 2), "start": st.just(5), "before": st.integers(0, 2), "after": st.integers(0, 2),
    "max_rounds": st.just(2), "sufficiency": st.just(0.1), "n": st.integers(1, 3),
    "description": st.just("acl: the groups that may read a document"),
}


def required(schema: dict[str, Any], query: str, other: str, ids: list[str], one: str,
             collection: str = "") -> dict[str, Any]:
    """A call's required arguments (what it searches or reads), by name (fan-out: `collection`)."""
    by_name = {"query": query, "query_list": [query], "batch_query_list": [[query, other]],
               "question_list": [[query, other]], "collections": [collection], "ids": ids, "id": one}
    names = schema.get("required", [])
    unknown = [n for n in names if n not in by_name]
    assert not unknown, f"required arguments this test cannot fill: {unknown} (add them to required())"
    return {n: by_name[n] for n in names}


def drawn(schema: dict[str, Any], mode: str | None, collection: str = "") -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for the tool: its required ones and any of the optional ones OPTIONS knows."""
    props = schema.get("properties", {})

    @st.composite
    def arguments(draw: st.DrawFn) -> dict[str, Any]:
        query, other = draw(st.sampled_from(QUERIES)), draw(st.sampled_from(QUERIES))
        ids = draw(st.lists(st.sampled_from(ID_POOL), min_size=1, max_size=4, unique=True))
        args = required(schema, query, other, ids, draw(st.sampled_from(ID_POOL)), collection)
        args |= draw(st.fixed_dictionaries({}, optional={k: s for k, s in OPTIONS.items() if k in props}))
        return args | ({"mode": mode} if mode else {})

    return arguments()


def reaching(schema: dict[str, Any], mode: str | None, collection: str = "") -> dict[str, Any]:
    """The call whose answer holds the planted best match (or, by id, the hidden documents)."""
    props = schema.get("properties", {})
    args = required(schema, Q, "zebrafinch dawn", ["hb-1", "pub:1", "hs-1"], "pub:0", collection)
    return args | {k: v for k, v in (("top_k", 3), ("max_rounds", 1), ("mode", mode)) if k in props and v}


# ---- the tests --------------------------------------------------------------------------------------

def test_every_read_tool_of_every_profile_has_a_kind() -> None:
    assert uncovered() == []
    assert {p for p, listed in read_tools().items() if listed} == set(registry.PROFILES)
    # the read tools refused to a restricted caller are those api/grants.py says cannot apply visibility
    assert {n for n, k in KIND.items() if k == "refused"} == {t.name for t in registry.TOOLS
                                                              if t.effects.read_only and t.name in UNSEEING}


def test_a_read_tool_the_registry_gains_fails_here_until_it_has_a_kind() -> None:
    """The plant: a read tool added to the registry (in the profiles of retriever_search) is under test."""
    peek = replace(registry.BY_NAME["retriever_search"], name="retriever_peek")
    assert uncovered([*registry.TOOLS, peek]) == ["retriever_peek"]
    assert {p: [t.name for t in listed if t.name == "retriever_peek"] for p, listed in
            read_tools([*registry.TOOLS, peek]).items()} == {"agent": [], "ultrarag": ["retriever_peek"],
                                                             "full": ["retriever_peek"]}


def test_a_hidden_document_is_the_operator_s_best_match_in_every_mode(worlds: Worlds) -> None:
    operator_s_best_match_is_hidden(worlds)


def test_a_hidden_document_is_the_operator_s_best_match_of_a_held_collection_in_every_mode(held_worlds: Worlds) -> None:
    operator_s_best_match_is_hidden(held_worlds)


def operator_s_best_match_is_hidden(worlds: Worlds) -> None:
    modes = modes_of(worlds.schemas["full"]["search"])
    assert set(modes) == {"hybrid", "dense", "bm25", "sparse"}
    first = {m: calls(OPERATOR, [worlds.servers["planted", "full"]], "search", {"query": Q, "mode": m, "top_k": 1})[0]
             .structured["results"][0]["hits"][0]["id"] for m in modes}
    assert first == {"hybrid": "hb-1", "dense": "hb-1", "bm25": "hb-1", "sparse": "hs-1"}


@pytest.mark.parametrize(("profile", "tool", "mode"), CASES)
def test_a_reader_gets_what_it_would_if_the_hidden_documents_did_not_exist(
        worlds: Worlds, llm: FakeLLM, profile: str, tool: str, mode: str | None) -> None:
    a_reader_gets_what_it_would_without_them(worlds, llm, profile, tool, mode)


@pytest.mark.parametrize(("profile", "tool", "mode"), CASES)
def test_a_reader_of_a_held_collection_gets_what_it_would_if_the_hidden_documents_did_not_exist(
        held_worlds: Worlds, llm: FakeLLM, profile: str, tool: str, mode: str | None) -> None:
    """The same where Milvus holds the documents (full_text on Milvus Lite): the rule's expression in
    every held search, read and count; BM25 scored over the documents the reader sees (seen.py)."""
    a_reader_gets_what_it_would_without_them(held_worlds, llm, profile, tool, mode, tol=HELD_TOLERANCE)


def a_reader_gets_what_it_would_without_them(worlds: Worlds, llm: FakeLLM, profile: str, tool: str, mode: str | None,
                                             tol: float = 1e-5) -> None:
    kind = KIND.get(tool)
    assert kind, f"{tool} is a read tool without a KIND here: say what it does with documents"
    schema = worlds.schemas[profile].get(tool)
    if schema is None:
        assert (profile, tool) in worlds.unserved, f"the {profile} server does not list {tool}: give the worlds what it needs"
        pytest.skip(worlds.unserved[profile, tool])
    assert mode in modes_of(schema), f"{tool} does not offer mode {mode} here"
    planted, alone = worlds.servers["planted", profile], worlds.servers["alone", profile]

    if kind in ("search", "read") or tool == "retriever_graph_search":  # the case reaches the hidden documents
        args = reaching(schema, mode, worlds.collection)
        (shown,) = calls(OPERATOR, [planted], tool, args)
        assert hidden_in(shown.whole, {}), (tool, args, shown.whole[:500])
    if kind == "list":  # the operator's listing counts them
        (shown,) = calls(OPERATOR, [planted], tool, {})
        assert shown.structured["collections"][0]["documents"] == N_DOCS

    # derandomized: the same examples on every run; not shrunk: a failure is reported as found (shrinking one
    # takes minutes of calls)
    @settings(max_examples=8, derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(drawn(schema, mode, worlds.collection))
    def a_reader_s_call(args: dict[str, Any]) -> None:
        sent = len(llm.requests)
        got, want = calls(READER, [planted, alone], tool, args)
        assert hidden_in(got.whole, args) == [], (tool, args, got.whole[:800])
        prompts = llm.prompts()[sent:]
        assert [hidden_in(p, args) for p in prompts if hidden_in(p, args)] == [], (tool, args)
        if kind == "llm":  # reads no document: none of them is sent to the LLM
            texts = [d["contents"] for d in [*SAMPLE_DOCS, *DOCS]]
            assert not [t for p in prompts for t in texts if t in p], (tool, args)
        if kind == "refused":
            assert got.error and "security.visibility" in got.whole, (tool, got.whole[:500])
        where = differs((got.error, got.texts, got.structured), (want.error, want.texts, want.structured), tol=tol)
        assert where is None, (tool, args, where)

    a_reader_s_call()
