"""The tools through a real MCP client (in memory): order of calls, shapes, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MCP
from retriever.store.corpus import CorpusFile
from retriever.testing.projects import engine_for, write_project

Q = "How do plants turn sunlight into sugar?"


@pytest.mark.parametrize(
    "tool, args",
    [
        pytest.param("retriever_embed", {}, id="embed"),
        pytest.param("retriever_index", {}, id="index"),
        pytest.param("retriever_search", {"query_list": Q}, id="search"),
        pytest.param("retriever_batch_search", {"batch_query_list": [[Q]]}, id="batch"),
        pytest.param("bm25_index", {}, id="bm25-index"),
        pytest.param("bm25_search", {"query_list": Q}, id="bm25-search"),
    ],
)
def test_tools_before_init_say_to_call_init(mcp: MCP, tool: str, args: dict) -> None:
    assert "call retriever_init first" in mcp.error(tool, args)


def test_search_before_any_index_says_which_tool_to_call(mcp: MCP) -> None:
    status = mcp.ok("retriever_init")
    assert status["dense_index"] is None and status["bm25_index"] is None
    assert "call retriever_embed then retriever_index" in mcp.error("retriever_search", {"query_list": Q})
    assert "call bm25_index" in mcp.error("bm25_search", {"query_list": Q})


def test_full_flow_dense_then_bm25_in_one_process(mcp: MCP, project: Path) -> None:
    mcp.ok("retriever_init")
    emb = mcp.ok("retriever_embed")
    assert emb["count"] == 30 and emb["dimension"] == 384
    assert np.load(project.parent / "out" / "embedding.npy").shape == (30, 384)
    mcp.ok("retriever_index")
    dense = mcp.ok("retriever_search", {"query_list": [Q], "top_k": 3})
    assert dense["ret_ids"][0][0] == "doc00"
    assert dense["ret_psg"][0][0].startswith("Photosynthesis")
    assert dense["ret_scores"][0] == sorted(dense["ret_scores"][0], reverse=True)
    # UltraRAG's fault: BM25 search failed right after bm25_index in the same process.
    mcp.ok("bm25_index")
    sparse = mcp.ok("bm25_search", {"query_list": [Q], "top_k": 3})
    assert "doc00" in sparse["ret_ids"][0]


def test_a_single_query_string_is_a_list_of_one(mcp_built: MCP) -> None:
    one = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 2})
    many = mcp_built.ok("retriever_search", {"query_list": [Q], "top_k": 2})
    assert one["ret_ids"] == many["ret_ids"] and len(one["ret_psg"]) == 1


@pytest.mark.parametrize("tool", ["retriever_search", "bm25_search"])
def test_top_k_beyond_the_corpus_returns_each_document_once(mcp_built: MCP, built, tool: str) -> None:
    query = "the" if tool == "retriever_search" else "the water cycle and the moon and the heart"
    out = mcp_built.ok(tool, {"query_list": [query], "top_k": 1000})
    ids = out["ret_ids"][0]
    assert len(ids) == len(set(ids))  # no padding with a repeated last document
    if tool == "retriever_search":
        assert len(ids) == 30
    assert out["ret_scores"][0] == sorted(out["ret_scores"][0], reverse=True)
    records = [json.loads(line) for line in open(built.config.corpus_path)]
    texts = {r["id"]: r["contents"] for r in records}
    assert all(texts[i] == t for i, t in zip(ids, out["ret_psg"][0]))  # text belongs to its id


@pytest.mark.parametrize("top_k", [0, -3])
@pytest.mark.parametrize("tool", ["retriever_search", "bm25_search"])
def test_top_k_below_one_is_an_error(mcp_built: MCP, tool: str, top_k: int) -> None:
    message = mcp_built.error(tool, {"query_list": Q, "top_k": top_k})
    assert "top_k" in message and "greater than or equal to 1" in message


@pytest.mark.parametrize(
    "tool, args, message",
    [
        pytest.param("retriever_search", {"query_list": []}, "non-empty list", id="empty-list"),
        pytest.param("bm25_search", {"query_list": []}, "non-empty list", id="bm25-empty-list"),
        pytest.param("retriever_batch_search", {"batch_query_list": []}, "non-empty list", id="empty-batch"),
    ],
)
def test_bad_query_lists(mcp_built: MCP, tool: str, args: dict, message: str) -> None:
    assert message in mcp_built.error(tool, args)


def test_batch_search_keeps_the_groups(mcp_built: MCP) -> None:
    groups = [[Q, "what causes earthquakes"], ["black holes"], "inflation and interest rates"]
    out = mcp_built.ok("retriever_batch_search", {"batch_query_list": groups, "top_k": 2})
    assert [len(g) for g in out["ret_psg_ls"]] == [2, 1, 1]
    assert out["ret_ids_ls"][0][1][0] == "doc11" and out["ret_ids_ls"][1][0][0] == "doc07"
    single = mcp_built.ok("retriever_search", {"query_list": ["black holes"], "top_k": 2})
    assert out["ret_ids_ls"][1] == single["ret_ids"] and out["ret_scores_ls"][1] == single["ret_scores"]


def test_ids_and_scores_without_text(mcp_built: MCP) -> None:
    out = mcp_built.ok("retriever_search", {"query_list": Q, "top_k": 3, "return_text": False})
    assert set(out) == {"ret_ids", "ret_scores"}


def test_metadata_on_request(mcp_built: MCP) -> None:
    out = mcp_built.ok("bm25_search", {"query_list": "vaccines immune memory", "top_k": 1, "return_metadata": True})
    assert out["ret_meta"][0][0] == {"topic": "medicine", "year": 2021}


def test_small_replies_carry_one_compact_text_copy(mcp_built: MCP) -> None:
    result = mcp_built.call("retriever_search", {"query_list": Q, "top_k": 2})
    assert json.loads(result.content[0].text) == result.structured_content
    assert ", " not in result.content[0].text.split('"ret_ids"')[1]  # compact separators


def test_large_replies_are_not_sent_twice(mcp_built: MCP) -> None:
    result = mcp_built.call("retriever_search", {"query_list": [Q] * 200, "top_k": 30, "max_bytes": 0})
    assert result.structured_content is None  # the JSON travels once, as text
    assert len(json.loads(result.content[0].text)["ret_psg"]) == 200


def test_replies_over_4_kb_travel_once(mcp_built: MCP) -> None:
    """The bound between the two: a reply of a few passages carries its JSON twice, one of
    several KB of passages (a top-10 of long passages) once, as text."""
    from retriever.api.replies import TEXT_COPY_LIMIT

    small = mcp_built.call("retriever_search", {"query_list": Q, "top_k": 2})
    medium = mcp_built.call("retriever_search", {"query_list": [Q] * 10, "top_k": 5})
    assert len(small.content[0].text) <= TEXT_COPY_LIMIT == 4096 < len(medium.content[0].text) < 64 * 1024
    assert small.structured_content == json.loads(small.content[0].text)
    assert medium.structured_content is None and len(json.loads(medium.content[0].text)["ret_psg"]) == 10


def test_embed_refuses_to_overwrite_unless_asked(mcp_built: MCP) -> None:
    assert "pass overwrite=true" in mcp_built.error("retriever_embed")
    assert "pass overwrite=true" in mcp_built.error("retriever_index")
    assert "pass overwrite=true" in mcp_built.error("bm25_index")


def test_bm25_index_overwrite_on_an_existing_index(mcp_built: MCP, built_project: Path) -> None:
    before = mcp_built.ok("bm25_search", {"query_list": Q, "top_k": 3})
    # UltraRAG's fault: bm25_index(overwrite=True) failed on an existing index.
    assert mcp_built.ok("bm25_index", {"overwrite": True})["count"] == 30
    assert mcp_built.ok("bm25_search", {"query_list": Q, "top_k": 3}) == before
    assert len(list((built_project.parent / "out" / "bm25").glob("data-*"))) == 1  # the old version is gone


def test_embeddings_are_written_a_chunk_at_a_time_with_the_same_result(tmp_path: Path, built_project: Path) -> None:
    path = write_project(tmp_path / "p", backend_configs={
        "sentence_transformers": {"sentence_transformers_encode": {"encode_chunk_size": 7}}})
    e = engine_for(path)
    e.init()
    calls: list[int] = []
    encode = e.embedder.encode_passages
    e.embedder.encode_passages = lambda texts: calls.append(len(texts)) or encode(texts)  # type: ignore[method-assign]
    e.embed(progress=False)
    assert calls == [7, 7, 7, 7, 2]
    chunked = np.load(tmp_path / "p" / "out" / "embedding.npy")
    whole = np.load(built_project.parent / "out" / "embedding.npy")
    assert np.allclose(chunked, whole, atol=1e-5)


def test_embed_shows_progress_on_stderr_not_stdout(engine, capsys: pytest.CaptureFixture[str]) -> None:
    engine.init()
    engine.embed()
    captured = capsys.readouterr()
    assert "embed" in captured.err and "30/30" in captured.err
    assert captured.out == ""


def test_hits_match_the_corpus_rows(built) -> None:
    docs = CorpusFile.open(built.config.corpus_path)
    for hits in built.search(["heart chambers", "printing press"], top_k=30, mode="dense"):
        for h in hits:
            assert docs.ids[h.row] == h.id and docs.get(h.row).text == h.text


def test_searches_keep_answering_while_the_index_is_rebuilt(built) -> None:
    import threading

    rebuild = threading.Thread(target=lambda: [built.index(overwrite=True) for _ in range(5)])
    rebuild.start()
    answers = []
    while rebuild.is_alive() or not answers:
        answers.append(built.search("black holes", top_k=1, mode="dense")[0][0].id)
    rebuild.join()
    assert set(answers) == {"doc07"}


def test_the_model_and_faiss_run_on_one_compute_thread(built) -> None:
    import threading

    seen = set()
    run = built.embedder._run
    built.embedder._run = lambda *a, **k: seen.add(threading.current_thread().name) or run(*a, **k)
    built.search(["black holes"], top_k=1, mode="dense")
    built.search(["tides"], top_k=1, mode="dense")
    assert len(seen) == 1 and next(iter(seen)).startswith("retriever-compute")


def test_work_sent_to_the_compute_thread_from_itself_runs_at_once() -> None:
    """A small search runs on the compute thread (mcp/core.py); where it hands dense work over
    (hybrid's `compute.submit`), that work runs there and then: waiting for the thread's next
    turn would wait forever."""
    import threading

    from retriever import compute

    got: list[tuple[int, str]] = []
    nested = threading.Thread(target=lambda: got.append(compute.on_compute_thread(
        lambda: compute.submit(lambda: (42, threading.current_thread().name)).result())), daemon=True)
    nested.start()
    nested.join(30)
    assert got and got[0][0] == 42 and got[0][1].startswith("retriever-compute"), "the compute thread waits on itself"
    failed = compute.on_compute_thread(lambda: compute.submit(lambda: 1 / 0))  # raised as the executor would
    with pytest.raises(ZeroDivisionError):
        failed.result()


def test_a_whole_call_waiting_on_a_worker_that_needs_the_compute_thread_does_not_deadlock() -> None:
    """A small search runs on the compute thread and may wait for a lock a worker holds while the
    worker needs the compute thread (the agent's first opening of its collection loads the model
    there; hybrid's calibration encodes there): the worker takes its work back and runs it."""
    import threading

    from retriever import compute

    lock = threading.Lock()
    lock.acquire()  # the worker's: opening the collection
    waiting = threading.Event()

    def search() -> str:  # on the compute thread, as serve_call runs a small search
        waiting.set()
        with lock:
            return "searched"

    call = compute.executor().submit(compute.whole(search))
    assert waiting.wait(10)
    done: list[str] = []

    def worker() -> None:
        done.append(compute.on_compute_thread(lambda: "model loaded"))  # needs the compute thread, holding the lock
        done.append(compute.submit(lambda: "warm-up encoded").result())
        lock.release()

    opening = threading.Thread(target=worker, daemon=True)
    opening.start()
    opening.join(30)
    assert done == ["model loaded", "warm-up encoded"], "the worker waits behind the call that waits for it"
    assert call.result(timeout=30) == "searched"
    assert compute.on_compute_thread(threading.current_thread).name.startswith("retriever-compute")  # still in service


def test_a_thread_in_the_compute_thread_s_place_never_runs_beside_it() -> None:
    """compute.here: a thread takes the compute thread's place only while that one is idle, and work
    sent to the compute thread meanwhile waits until the place is given back (one thread at a time on
    the model and the indexes). Planted (the compute thread not waiting for the place): 1 failed."""
    import threading
    import time

    from retriever import compute

    turns = compute.Turns("retriever-compute-test-here")
    inside, overlaps = [0], []

    def work(name: str) -> str:
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.05)
        inside[0] -= 1
        return name

    with turns.here() as here:
        assert here and compute.on_it()
        sent = turns.submit(work, "sent meanwhile")
        time.sleep(0.3)  # the compute thread has it: it waits for the place
        assert not sent.done(), "the compute thread ran work while another thread had its place"
        assert work("in its place") == "in its place"
    assert not compute.on_it()
    assert sent.result(timeout=30) == "sent meanwhile" and max(overlaps) == 1
    started, held = threading.Event(), threading.Event()
    busy = turns.submit(lambda: started.set() or held.wait(30))
    assert started.wait(30)
    with turns.here() as here:  # the compute thread is busy: nothing changes
        assert not here and not compute.on_it()
    held.set()
    busy.result(timeout=30)
    turns.shutdown()


def test_a_call_in_the_compute_thread_s_place_waiting_on_a_worker_does_not_deadlock() -> None:
    """A quick search run in the compute thread's place (the stdio server's event loop: mcp/core.py
    at_once) may wait for a lock a worker holds while the worker needs the compute thread: the
    worker's work waits for the place, is taken back after compute.PATIENCE and runs on the worker.
    Planted (the compute thread takes the work before it has the place): 1 failed."""
    import threading

    from retriever import compute

    lock = threading.Lock()
    lock.acquire()  # the worker's
    done: list[str] = []

    def worker() -> None:
        done.append(compute.on_compute_thread(lambda: "model loaded"))
        lock.release()

    def search() -> str:
        threading.Thread(target=worker, daemon=True).start()
        with lock:
            return "searched"

    got: list[object] = []

    def loop() -> None:  # as the event loop's thread
        with compute.here() as here:
            got.append(here and compute.whole(search)())

    caller = threading.Thread(target=loop, daemon=True)
    caller.start()
    caller.join(30)
    assert got == ["searched"], "the call and the worker wait on each other"
    assert done == ["model loaded"]
    assert compute.on_compute_thread(threading.current_thread).name.startswith("retriever-compute")


def test_callers_take_turns_on_the_compute_thread() -> None:
    """Work waits in one queue per caller (compute.CALLER) and the compute thread serves the
    queues in turn: a caller's sixth piece of work queued before another caller's first does not
    run before it. Planted (one queue for every caller, first come first served): the test failed."""
    import contextvars
    import threading

    from retriever import compute

    turns = compute.Turns("retriever-compute-test")
    started, held, order = threading.Event(), threading.Event(), []

    def as_caller(caller: str, fn: Any) -> Any:
        ctx = contextvars.copy_context()
        ctx.run(compute.CALLER.set, caller)
        return ctx.run(turns.submit, fn)

    first = as_caller("a", lambda: started.set() or held.wait(30))  # holds the thread while the queues fill
    assert started.wait(30)
    done = [as_caller("a", lambda i=i: order.append(f"a{i}")) for i in range(5)]
    done.append(as_caller("b", lambda: order.append("b")))
    done.append(as_caller("", lambda: order.append("-")))  # the one caller of stdio and the library
    assert turns.waiting() == {"a": 5, "b": 1, "": 1}
    held.set()
    for future in (first, *done):
        future.result(timeout=30)
    assert order == ["a0", "b", "-", "a1", "a2", "a3", "a4"]
    cancelled = as_caller("a", lambda: order.append("never"))  # taken back before it started
    blocker = as_caller("a", lambda: None)
    assert cancelled.cancel() or cancelled.done()
    blocker.result(timeout=30)
    assert "never" not in order
    turns.shutdown()
