"""A folder of real files in their real formats (retriever/testing/folders.py), kept in sync with a
collection: parsed with its pages and headings, searched over MCP with citations, then edited,
deleted, renamed, touched and killed mid-sync, each time ending equal to a fresh sync of the same
folder (ids, texts, metadata and search results)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from retriever.mcp.server import build_server
from retriever.sources.formats import parse_path
from retriever.testing.folders import FILLER, MARKERS, make_folder
from retriever.testing.projects import engine_for, write_project

REFUSED = {"broken/bad.pdf": "not a readable PDF", "broken/picture.png": ".png files are not read"}


def project(root: Path, docs: Path, out: str = "out", **source: Any) -> Path:
    """A project whose only documents are `docs`' files (no corpus file)."""
    return write_project(root, corpus="", corpus_path=None, embedding_path=f"{out}/embedding.npy", docs_path=f"{out}/docs",
                         index_backend_configs={"faiss": {"index_path": f"{out}/faiss"}},
                         backend_configs={"bm25": {"save_path": f"{out}/bm25"}},
                         sources=[{"path": str(docs), **source}])


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    make_folder(tmp_path / "docs")
    return tmp_path / "docs"


def synced(config: Path) -> tuple[Any, dict[str, Any]]:
    e = engine_for(config)
    e.init()
    return e, e.sync(e.config.sources)


def snapshot(e: Any) -> dict[str, Any]:
    """Every live document (id -> text and metadata) and every marker's score of every document
    per mode (a ranking of all of them: files share their filler text, so ties abound)."""
    s = e.need("test")
    c = s.collection
    docs = {c.ids[r]: (c.get(r).text, c.get(r).metadata) for r in c.live_rows().tolist()}
    queries = list(MARKERS) + ["filler text about the weather", "lanterns"]
    k = len(docs)
    found = {mode: [ranked(row) for row in e.search(queries, k, mode=mode)] for mode in ("dense", "bm25", "hybrid")}
    return {"docs": docs, "found": found}


def ranked(hits: list[Any]) -> dict[str, float]:
    return {h.id: h.score for h in hits}


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The same documents, and the same scores within 0.002: a text embedded in another batch
    (another padding length) may differ in the last bits of bf16 or int8 arithmetic."""
    assert a["docs"] == b["docs"]
    for mode, rows in a["found"].items():
        for x, y in zip(rows, b["found"][mode], strict=True):
            assert x.keys() == y.keys(), mode
            worst = max((abs(x[i] - y[i]) for i in x), default=0.0)
            assert worst < 2e-3, (mode, worst)


def test_each_format_parses_with_its_page_slide_or_heading(docs: Path) -> None:
    for marker, where in MARKERS.items():
        parsed = parse_path(docs / where["path"], name=where["path"])
        sections = [s for s in parsed.sections if marker in " ".join(s.text.split())]
        assert len(sections) == 1, (where["path"], [s.text[:80] for s in parsed.sections])
        assert sections[0].page == where.get("page"), where
        if "heading" in where:
            assert " > ".join(sections[0].heading) == where["heading"], where
    html = parse_path(docs / "web" / "latin.html")
    assert html.meta["encoding"] != "utf-8" and "var x" not in html.sections[0].text  # Latin-1, found; no script
    deck = parse_path(docs / "slides" / "deck.pptx")
    assert [s.page for s in deck.sections] == [1, 2, 3] and deck.sections[1].text.count("Harbour upkeep") == 1
    for rel, why in REFUSED.items():
        with pytest.raises(Exception, match=why):
            parse_path(docs / rel, name=rel)


def test_a_synced_folder_is_searched_over_mcp_and_each_hit_cites_its_place(docs: Path, tmp_path: Path) -> None:
    e, report = synced(project(tmp_path / "p", docs))
    assert report["failed"] == 2 and {x["path"]: x["error"] for x in report["errors"]}.keys() == REFUSED.keys()
    assert all(why in {x["path"]: x["error"] for x in report["errors"]}[rel] for rel, why in REFUSED.items())
    assert str(docs) not in json.dumps(report)  # no server path in what a caller reads
    assert report["new"] == report["files"] - 2

    async def run() -> tuple[Any, Any, Any]:
        async with Client(build_server(e)) as client:  # the agent profile: its default search is hybrid
            found = await client.call_tool("search", {"query": list(MARKERS), "top_k": 1})
            whole = await client.call_tool("get_document", {"ids": ["guide/manual.pdf", "a/README.md:0"]})
            pdf_uri = json.loads(found.content[0].text)["results"][2]["hits"][0]["source"]["uri"]
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates] == ["retriever://documents/{id}"]
            read = await client.read_resource(pdf_uri)
            return json.loads(found.content[0].text), json.loads(whole.content[0].text), read[0].text

    found, whole, read = asyncio.run(run())
    for row, (marker, where) in zip(found["results"], MARKERS.items()):
        hit = row["hits"][0]
        assert marker in " ".join(hit["text"].split()), (marker, hit)
        source = hit["source"]
        assert source["path"] == where["path"] and source["document"] == where["path"]
        assert source.get("page") == where.get("page") and source.get("heading") == where.get("heading", source.get(
            "heading")) and source["modified"].endswith("+00:00")
        assert "sha256" not in hit["metadata"] and "mtime_ns" not in hit["metadata"]
    pdf, chunk = whole["documents"]
    assert pdf["id"] == "guide/manual.pdf" and all(m in pdf["text"] for m in list(MARKERS)[2:4])
    assert read == pdf["text"]  # the hit's URI, read as an MCP resource: the whole file
    assert chunk["id"] == "a/README.md:0" and whole["missing"] == []


def test_same_named_files_in_two_folders_are_two_documents(docs: Path, tmp_path: Path) -> None:
    e, _ = synced(project(tmp_path / "p", docs))
    ids = set(e.need("t").collection.row_of)
    assert {"a/README.md:0", "b/README.md:0"} <= ids
    # ingest_document's default id is the path too: a second README never replaces the first
    (tmp_path / "p" / "x").mkdir()
    (tmp_path / "p" / "y").mkdir()
    for folder in ("x", "y"):
        shutil.copy(docs / f"{'a' if folder == 'x' else 'b'}" / "README.md", tmp_path / "p" / folder / "README.md")

    async def run() -> list[Any]:
        async with Client(build_server(e)) as client:
            return [json.loads((await client.call_tool("ingest_document", {"path": f"{f}/README.md"})).content[0].text)
                    for f in ("x", "y")]

    first, second = asyncio.run(run())
    assert first["source_id"] == "x/README.md" and second["source_id"] == "y/README.md" and second["removed"] == 0
    assert {"x/README.md:0", "y/README.md:0"} <= set(e.need("t").collection.row_of)


def change(docs: Path) -> None:
    """An edit, a deletion, a rename, a touch (same bytes, new mtime) and a new file."""
    with (docs / "a" / "README.md").open("a") as f:
        f.write("\n## Addendum\n\nPlum kites are flown by retired astronomers.\n")
    (docs / "b" / "README.md").unlink()
    (docs / "guide" / "manual.pdf").rename(docs / "guide" / "manual-v2.pdf")
    later = time.time() + 5
    os.utime(docs / "LICENSE", (later, later))
    (docs / "c").mkdir()
    (docs / "c" / "README.md").write_text(f"# Gamma\n\nAmber moles tunnel under the observatory.\n\n{FILLER}\n")


def test_edits_deletions_renames_then_a_sync_equal_a_fresh_sync(docs: Path, tmp_path: Path) -> None:
    e, _ = synced(project(tmp_path / "p", docs))
    again = e.sync(e.config.sources)
    assert again["unchanged"] == again["files"] - 2 and again["embedded"] == 0 and again["chunks_added"] == 0
    change(docs)
    after = e.sync(e.config.sources)
    assert (after["new"], after["changed"], after["moved"], after["touched"], after["deleted"]) == (1, 1, 1, 1, 1)
    # only the new texts are embedded: the edited file's unchanged chunks, the move and the touch reuse vectors
    assert 0 < after["embedded"] <= 3 and after["reused"] > 0
    fresh, _ = synced(project(tmp_path / "q", docs, out="fresh"))
    assert_same(snapshot(e), snapshot(fresh))
    ids = set(e.need("t").collection.row_of)
    assert "guide/manual-v2.pdf:0" in ids and not any(i.startswith(("guide/manual.pdf", "b/README.md")) for i in ids)


def test_a_sync_killed_mid_way_loses_nothing_and_the_next_finishes(docs: Path, tmp_path: Path) -> None:
    for n in range(150):  # enough files for several commits of 8 chunks before the kill
        (docs / "many" / f"{n // 50}").mkdir(parents=True, exist_ok=True)
        (docs / "many" / f"{n // 50}" / f"note{n}.txt").write_text(f"Note {n} is about the number {n * 7919}. {FILLER}")
    config = project(tmp_path / "p", docs, commit_chunks=8)
    proc = subprocess.Popen([str(BIN / "retriever"), "sync", "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    manifest = tmp_path / "p" / "out" / "docs" / "manifest.json"
    deadline = time.monotonic() + 180
    while not manifest.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # a few more commits
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL and proc.stdout is not None and proc.stdout.read() == b""
    part = engine_for(config)
    part.init()
    held = len(part.need("t").collection)
    e, report = synced(config)
    assert 0 < held < len(e.need("t").collection), "the kill came before the first commit or after the last"
    assert report["unchanged"] > 0 and report["new"] > 0
    fresh, _ = synced(project(tmp_path / "q", docs, out="fresh"))
    assert_same(snapshot(e), snapshot(fresh))


def test_the_cli_syncs_named_folders_and_exits_2_only_when_nothing_worked(docs: Path, tmp_path: Path) -> None:
    config = project(tmp_path / "p", docs)
    proc = run_cli("sync", "--config", str(config), str(docs / "a"), str(docs / "b"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["new"] == 2 and report["sources"] == ["a", "b"] and "sync: 1/1 files" in proc.stderr
    # one of them alone: the same ids (the folder's name), nothing new
    again = json.loads(run_cli("sync", "--config", str(config), str(docs / "a")).stdout)
    assert (again["sources"], again["new"], again["unchanged"]) == (["a"], 0, 1)
    assert "another writer" not in proc.stderr  # its own commits are not taken for another process's
    bad = tmp_path / "bad"
    (bad).mkdir()
    shutil.copy(docs / "broken" / "bad.pdf", bad / "bad.pdf")
    proc = run_cli("sync", "--config", str(config), "--collection", "bad", str(bad))
    assert proc.returncode == 2 and json.loads(proc.stdout)["errors"][0]["path"] == "bad.pdf"


def test_a_running_serve_and_deploy_answer_what_a_sync_in_another_process_published(docs: Path,
                                                                                     tmp_path: Path) -> None:
    from test_deploy import Deploy

    config = project(tmp_path / "p", docs)
    synced(config)
    gone, new = list(MARKERS)[1], "Amber moles tunnel under the observatory."
    deploy = Deploy(config, tmp_path)
    transport = StdioTransport(command=str(BIN / "retriever"), args=["serve", "--config", str(config)])

    async def serve_search(client: Client, query: str) -> list[str]:
        out = json.loads((await client.call_tool("search", {"query": query, "top_k": 3})).content[0].text)
        return [h["source"]["path"] for h in out["results"][0]["hits"]]

    def deploy_search(query: str) -> list[str]:
        return [i.rsplit(":", 1)[0] for i in deploy.search(query_list=[query], top_k=3, mode="hybrid")["ret_ids"][0]]

    async def run() -> None:
        async with Client(transport) as client:
            assert (await serve_search(client, gone))[0] == "b/README.md" and deploy_search(gone)[0] == "b/README.md"
            before = deploy.client.get("/readyz").json()["generation"]
            (docs / "b" / "README.md").unlink()
            (docs / "c").mkdir()
            (docs / "c" / "new.md").write_text(f"# New\n\n{new}\n")
            proc = run_cli("sync", "--config", str(config))  # another process publishes
            assert proc.returncode == 0, proc.stderr[-2000:]
            # the next search after the publish answers from it: the new file found, the deleted one never
            assert (await serve_search(client, new))[0] == "c/new.md"
            assert new in (await client.read_resource("retriever://documents/c%2Fnew.md"))[0].text  # stdio's resources
            assert "b/README.md" not in await serve_search(client, gone)
            assert deploy_search(new)[0] == "c/new.md" and "b/README.md" not in deploy_search(gone)
            assert deploy.client.get("/readyz").json()["generation"] > before

    try:
        asyncio.run(run())
    finally:
        deploy.stop()


def test_retriever_add_cuts_long_documents_as_the_yaml_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from retriever.main import main

    config = project(tmp_path / "p", tmp_path)
    words = FILLER * 100  # about 3,000 words
    tail = "Lilac submarines photograph the northern lights."
    records = [{"id": "long", "title": "A long one", "contents": f"{words} {tail}"}, {"id": "short", "contents": "x y"}]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    sets = ["--set", "chunking.by=word", "--set", "chunking.length=100", "--set", "chunking.overlap=10"]
    assert main(["add", "--config", str(config), *sets, str(tmp_path / "docs.jsonl")]) == 0
    report = json.loads(capsys.readouterr().out)
    n = len(f"{words} {tail}".split())
    assert report["chunks"] == report["documents"] == -(-(n - 100) // 90) + 1 + 1  # windows of 100 by 90, "short"
    e = engine_for(config)
    e.init()
    last = f"long:{report['chunks'] - 2}"
    for hits in (e.search([tail], 1, mode="dense")[0], e.bm25_search([tail], 1)[0]):
        assert hits[0].id == last and tail in hits[0].text and hits[0].metadata["title"] == "A long one"
    # a shorter version replaces the document's chunks, none of the old ones left over
    (tmp_path / "docs.jsonl").write_text(json.dumps({"id": "long", "contents": tail}) + "\n")
    assert main(["add", "--config", str(config), *sets, str(tmp_path / "docs.jsonl")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["removed"] == int(last.split(":")[1]) and report["documents"] == 2


def test_the_sync_sources_tool_syncs_the_yaml_s_folders_and_takes_no_path(docs: Path, tmp_path: Path) -> None:
    from conftest import MCP

    mcp = MCP(engine_for(project(tmp_path / "p", docs)))  # the full profile: the agent's has no sync tool
    mcp.ok("retriever_init")
    first = mcp.ok("sync_sources")
    assert first["new"] == first["files"] - 2 and first["failed"] == 2
    again = mcp.ok("sync_sources")
    assert again["unchanged"] == again["files"] - 2 and again["chunks_added"] == 0
    assert "path" in mcp.error("sync_sources", {"path": str(docs)})  # a call names no folder


def test_watch_syncs_as_files_come_and_go_and_stops_on_sigterm(docs: Path, tmp_path: Path) -> None:
    config = project(tmp_path / "p", docs)
    proc = subprocess.Popen([str(BIN / "retriever"), "watch", "--config", str(config), "--debounce", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None

    def next_report() -> dict[str, Any]:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, "watch exited"
        return json.loads(line)

    try:
        assert next_report()["new"] > 10  # the first sync
        time.sleep(0.5)  # the watch has started after its first report; give the OS watch a moment
        (docs / "fresh.md").write_text("# Fresh\n\nWalnut gondolas ferry the night librarians.\n")
        report = next_report()
        assert (report["new"], report["deleted"]) == (1, 0)
        (docs / "fresh.md").unlink()
        report = next_report()
        assert (report["new"], report["deleted"]) == (0, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    e = engine_for(config)
    e.init()
    assert not any(i.startswith("fresh.md") for i in e.need("t").collection.row_of)


def test_the_agent_ingests_a_folder_inside_the_allowed_paths_and_no_other(docs: Path, tmp_path: Path) -> None:
    root = tmp_path / "p"
    config = project(root, docs)  # docs lies outside the project's folder: not an allowed path
    shutil.copytree(docs / "a", root / "shared" / "a")
    shutil.copytree(docs / "guide", root / "shared" / "guide")
    e = engine_for(config)

    async def run() -> tuple[Any, Any]:
        async with Client(build_server(e)) as client:  # the agent's profile
            ok = await client.call_tool("ingest_document", {"path": "shared"})
            refused = await client.call_tool("ingest_document", {"path": str(docs)}, raise_on_error=False)
            return json.loads(ok.content[0].text), refused

    ok, refused = asyncio.run(run())
    assert ok["new"] == 3 and ok["sources"] == ["shared"] and refused.is_error
    assert {"shared/a/README.md:0", "shared/guide/manual.pdf:0"} <= set(e.need("t").collection.row_of)


def test_a_folder_named_on_the_command_line_may_not_take_a_yaml_source_s_name(docs: Path, tmp_path: Path) -> None:
    """A source's name says which files of its collection are its own: a second folder under the
    same name would delete the first one's files as gone."""
    config = project(tmp_path / "p", docs / "a", name="x")  # the YAML's source: docs/a, named x
    shutil.copytree(docs / "b", tmp_path / "elsewhere" / "x")  # another folder whose name is x
    proc = run_cli("sync", "--config", str(config), str(tmp_path / "elsewhere" / "x"))
    assert proc.returncode == 2 and "both fill collection" in proc.stderr and proc.stdout == "", proc.stderr[-1000:]
    proc = run_cli("sync", "--config", str(config), str(docs / "a"))  # the YAML's own folder: synced as it says
    assert proc.returncode == 0 and json.loads(proc.stdout)["sources"] == ["x"], proc.stderr[-1000:]
    proc = run_cli("sync", "--config", str(config), str(docs / "b"))  # named b: no clash, its own ids
    assert proc.returncode == 0 and json.loads(proc.stdout)["new"] == 1, proc.stderr[-1000:]


def test_a_chunk_s_text_starts_with_its_title_and_headings_and_offsets_place_the_rest(docs: Path,
                                                                                        tmp_path: Path) -> None:
    e, _ = synced(project(tmp_path / "p", docs))
    c = e.need("t").collection
    chunk = c.get(c.row_of["guide/report.docx:1"])
    line, _, body = chunk.text.partition("\n")
    assert line == "Annual report > Logistics" and chunk.metadata["context_chars"] == len(line) + 1
    assert body.startswith("Granite pelicans") and chunk.metadata["end"] - chunk.metadata["start"] == len(body)
    whole = e.fetcher("t")
    from retriever.documents.windows import merge
    from retriever.documents.windows import whole as all_chunks

    text = merge(all_chunks(whole, "guide/report.docx", 100))
    assert "Annual report > Logistics" not in text and list(MARKERS)[4] in text  # the whole file, no context lines
    plain, _ = synced(project(tmp_path / "q", docs, out="plain", context=False))
    assert plain.need("t").collection.get(plain.need("t").collection.row_of["guide/report.docx:1"]).text == body


def test_sync_sources_reports_progress_to_a_client_that_asks_on_both_transports(docs: Path, tmp_path: Path) -> None:
    """A client that sends a progressToken gets notifications/progress from the sync, file by file
    (at most one each PROGRESS_EVERY seconds, and the last), from FastMCP's server and from ours."""
    config = project(tmp_path / "p", docs)
    files = len([p for p in docs.rglob("*") if p.is_file()])

    async def sync(client: Client) -> tuple[dict[str, Any], list[tuple[float, float | None, str | None]]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def handler(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        out = await client.call_tool("sync_sources", {}, progress_handler=handler)
        return json.loads(out.content[0].text), seen

    async def run() -> list[tuple[dict[str, Any], list[Any]]]:
        stdio = StdioTransport(command=str(BIN / "retriever"), args=["serve", "--config", str(config), "--tools", "full"])
        async with Client(stdio) as client:
            first = await sync(client)
        shutil.rmtree(tmp_path / "p" / "out")
        async with Client(build_server(engine_for(config), profile="full")) as client:
            return [first, await sync(client)]

    for report, seen in asyncio.run(run()):
        assert report["new"] + report["failed"] == files and seen, report
        assert seen[-1][:2] == (files, files) and all(t == files for _, t, _ in seen), seen
        assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)  # progress only grows
        assert all(isinstance(m, str) and m for _, _, m in seen)  # the file just done


def test_a_cancelled_sync_stops_between_files_and_the_next_one_finishes_the_job(tmp_path: Path) -> None:
    """notifications/cancelled stops a sync_sources call at its next file: no answer is sent, the
    batches it committed stay (nothing acknowledged is lost) and the next sync does the rest."""
    docs = tmp_path / "many"
    docs.mkdir()
    n = 600
    for i in range(n):
        (docs / f"note{i:03}.md").write_text(f"# Note {i}\n\n" + FILLER * 3 + f" Entry {i} of the ledger.\n")
    config = project(tmp_path / "p", docs, commit_chunks=8)
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(config), "--tools", "full"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    def until(test: Any) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while not got or not test(got[-1]):
            got.append(json.loads(proc.stdout.readline()))
        return got

    try:
        send({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                          "clientInfo": {"name": "t", "version": "0"}}})
        until(lambda m: m.get("id") == 1)
        send({"method": "notifications/initialized"})
        call = {"method": "tools/call", "params": {"name": "sync_sources", "arguments": {}, "_meta": {"progressToken": "p"}}}
        send({"id": 2, **call})
        # cancelled once a report (they come PROGRESS_EVERY seconds apart) says two batches are in
        first = until(lambda m: m.get("method") == "notifications/progress" and m["params"]["progress"] > 16)[-1]["params"]
        send({"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "enough"}})
        send({"id": 3, **call})  # the same sync again, once the first has stopped
        after = until(lambda m: m.get("id") == 3)
        assert not any(m.get("id") == 2 for m in after)  # a cancelled call gets no answer
        report = json.loads(after[-1]["result"]["content"][0]["text"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
    assert first["progressToken"] == "p" and first["total"] == n and first["progress"] < n
    assert "request cancelled" in stderr, stderr[-2000:]
    # the first call committed some batches before it stopped, and not all of them: the second
    # skipped what was committed and did the rest
    assert 0 < report["unchanged"] < n and report["unchanged"] + report["new"] == n, report
    assert report["documents"] == n and report["failed"] == 0, report  # one chunk per note, each once


def test_the_official_sdks_client_hears_progress_while_one_large_file_is_ingested(tmp_path: Path) -> None:
    """ingest_document of one file with a progressToken: the official MCP SDK's client (2.x), over
    stdio, gets notifications/progress while its chunks are embedded (per PIECE embedding batches,
    at most every PROGRESS_EVERY seconds, the last always): growing, the last equal to the total,
    the total the chunks the reply names."""
    from mcp.client.client import Client as SDKClient
    from mcp.client.stdio import StdioServerParameters

    root = tmp_path / "p"
    config = write_project(root, corpus="", corpus_path=None, batch_size=2,  # a piece: 2 x PIECE chunks
                           index_backend_configs={"faiss": {"index_path": "out/faiss"}})
    words = " ".join(f"ledger{i % 97} entry{i}" for i in range(100 * 200))  # about 300 chunks
    (root / "ledger.md").write_text(f"# Ledger\n\n{words}\n")
    seen: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def run() -> Any:
        params = StdioServerParameters(command=str(BIN / "retriever"), args=["serve", "--config", str(config)])
        async with SDKClient(params) as client:
            return await client.call_tool("ingest_document", {"path": "ledger.md"}, progress_callback=heard)

    out = asyncio.run(run())
    assert not out.is_error, out.content
    chunks = len(out.structured_content["ids"])
    assert chunks >= 100 and len(seen) >= 2, (chunks, seen)
    assert seen[-1][:2] == (chunks, chunks) and all(t == chunks for _, t, _ in seen), seen
    assert [p for p, _, _ in seen] == sorted({p for p, _, _ in seen}), seen  # each report further on
    assert all(m == "chunks embedded" for _, _, m in seen)
