"""The deploy service serves a lone caller's quick search where it arrives (service/batcher.py
Batcher.now), without queueing it for the worker: the same reply as the worker's, the same
metrics of a batch, and anything else still queued (issue 46: per-call overhead). The app runs
in process, driven over ASGI by httpx."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from retriever.service.app import build_app
from retriever.service.batcher import Batcher
from retriever.testing.projects import engine_for

Q = "what causes tides"


def _serve(built_project: Path, bodies: list[dict[str, Any]], alone: bool = True) -> tuple[list[Any], list[Any]]:
    """Each body POSTed to /search in turn: the replies (status, JSON), and the requests the worker's
    queue got (Batcher.submit). `alone` False: the service counts another request inside it."""
    app = build_app(engine_for(built_project), "127.0.0.1", 8000)
    submitted: list[Any] = []
    submit = Batcher.submit

    async def run() -> list[Any]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
                for _ in range(100):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                    await asyncio.sleep(0.1)
                out = []
                for body in bodies:
                    r = await client.post("/search", json=body)
                    out.append((r.status_code, r.json(), r.headers["content-type"]))
                metrics = (await client.get("/metrics")).text
                return [out, metrics]

    def counted(self: Batcher, request: Any) -> Any:
        submitted.append(request)
        return submit(self, request)

    Batcher.submit = counted  # type: ignore[method-assign]
    alone_of = Batcher.__init__
    if not alone:
        def crowded(self: Batcher, *args: Any, **kwargs: Any) -> None:
            alone_of(self, *args, **kwargs)
            self.alone = lambda: False
        Batcher.__init__ = crowded  # type: ignore[method-assign]
    try:
        out, metrics = asyncio.run(run())
    finally:
        Batcher.submit = submit  # type: ignore[method-assign]
        Batcher.__init__ = alone_of  # type: ignore[method-assign]
    return out, [submitted, metrics]


def _batches(metrics: str) -> float:
    return next(float(line.split()[-1]) for line in metrics.splitlines()
                if line.startswith("retriever_batch_requests_count"))


def test_a_lone_quick_search_is_served_at_once_as_the_worker_serves_it(built_project: Path) -> None:
    bodies = [{"query_list": [Q], "top_k": 3, "mode": mode} for mode in ("dense", "bm25", "hybrid")]
    now, (queued_now, metrics_now) = _serve(built_project, bodies)
    worker, (queued_worker, metrics_worker) = _serve(built_project, bodies, alone=False)
    assert queued_now == [] and len(queued_worker) == 3  # served where they arrived; else queued
    assert now == worker  # status, JSON and content type alike
    assert all(status == 200 and kind == "application/json" for status, _, kind in now)
    assert now[0][1]["ret_ids"][0][0] == "doc08"
    assert _batches(metrics_now) == _batches(metrics_worker) == 3  # each counted as a batch of one


def test_a_search_that_is_not_quick_is_queued(built_project: Path) -> None:
    bodies = [{"query_list": [Q, Q], "top_k": 3, "mode": "dense"},  # two queries
              {"query_list": [Q], "top_k": 3, "mode": "dense", "filters": {"field": "id", "operator": "==",
                                                                           "value": "doc08"}}]
    out, (queued, _) = _serve(built_project, bodies)
    assert len(queued) == 2 and [s for s, _, _ in out] == [200, 200]
    assert json.dumps(out[1][1]["ret_ids"]) == '[["doc08"]]'


def test_an_error_served_at_once_is_answered_as_a_queued_one(built_project: Path) -> None:
    bodies = [{"query_list": [Q], "top_k": 3, "mode": "sparse"}]  # no sparse model in this project
    now, (queued_now, _) = _serve(built_project, bodies)
    worker, (queued_worker, _) = _serve(built_project, bodies, alone=False)
    assert queued_now == [] and len(queued_worker) == 1  # answered where it arrived; else queued
    assert now == worker and now[0][0] >= 400


def test_the_replys_json_is_what_json_dumps_gave() -> None:
    """Replies are written by api/replies.py json_bytes (app.py _json_reply), no longer by Starlette's
    JSONResponse (json.dumps): the same JSON; NaN, which json.dumps refused (a 500), as null."""
    from retriever.service.app import _json_reply
    from starlette.responses import JSONResponse

    payload = {"ret_ids": [["d1", "d2"]], "ret_scores": [[0.5, 1e-05]], "ret_psg": [["é€𝄞 \"quoted\"\n"]],
               "none": None, "big": 12345678901234567890, "flag": True}
    ours = _json_reply(payload)
    assert json.loads(ours.body) == json.loads(JSONResponse(payload).body)
    assert ours.media_type == "application/json"
    assert json.loads(_json_reply({"score": float("nan")}).body) == {"score": None}


def test_callers_long_gone_are_forgotten_when_served_at_once() -> None:
    """Batcher.now takes a turn as the worker's _take does, and forgets callers with nothing waiting
    once they pass 4 x max_queue, as _take does."""
    batcher = Batcher.__new__(Batcher)
    batcher._turn, batcher._served, batcher._jobs, batcher.max_queue = 0, {}, [], 4
    for i in range(100):
        batcher._served_now(f"caller {i}")
    assert len(batcher._served) <= 4 * 4 + 1 and batcher._turn == 100
