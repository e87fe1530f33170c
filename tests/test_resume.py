"""`retriever index` killed with SIGKILL three times at different points, then run again, ends with
the index a clean run builds (ids, vectors, FAISS and BM25 results), and no finished chunk of the
embedding is embedded twice: each run starts where the last one's progress record says."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import BIN
from retriever.testing.projects import SCIFACT, engine_for, write_project

pytestmark = pytest.mark.slow  # six `retriever index` processes
CHUNK = 16
SETTINGS = ["--set", f"backend_configs.sentence_transformers.sentence_transformers_encode.encode_chunk_size={CHUNK}",
            "--set", "backend_configs.sentence_transformers.runtime=openvino",  # fp32: the same vectors every run
            "--set", "backend_configs.sentence_transformers.precision=fp32"]


def project(folder: Path) -> Path:
    """400 SciFact abstracts cut to 300 characters: 25 chunks, seconds per run."""
    folder.mkdir(parents=True)
    lines = []
    for line in (SCIFACT / "corpus.jsonl").read_text().splitlines()[:400]:
        rec = json.loads(line)
        lines.append(json.dumps({"id": rec["_id"], "contents": (rec["title"] + " " + rec["text"])[:300]}))
    (folder / "c.jsonl").write_text("\n".join(lines) + "\n")
    return write_project(folder, corpus="none", corpus_path="c.jsonl")


def progress(config: Path) -> int:
    try:
        return int(json.loads((config.parent / "out" / ".embedding.npy.partial.json").read_text())["done"])
    except (OSError, ValueError, KeyError):
        return 0


def index(config: Path, log: Path, kill_when: Callable[[], bool] | None = None) -> int | None:
    """`retriever index`; with `kill_when`, SIGKILLed once it holds. Returns the exit code (None: killed)."""
    with log.open("w") as err:
        proc = subprocess.Popen([str(BIN / "retriever"), "index", "--config", str(config), *SETTINGS],
                                stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if kill_when is not None and kill_when():
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return None
            time.sleep(0.02)
        return proc.wait(timeout=5)


def resumed_at(log: Path) -> int | None:
    found = re.search(r"resuming at chunk (\d+) of (\d+)", log.read_text())
    return int(found.group(1)) if found else None


def test_three_kills_then_the_same_index_as_a_clean_run(tmp_path: Path) -> None:
    config = project(tmp_path / "killed")
    sidecar = config.parent / "out" / "embedding.npy.json"
    points = [lambda: progress(config) >= 3, lambda: progress(config) >= 12, lambda: progress(config) >= 20]
    done_at_kill = []
    for n, point in enumerate(points):
        assert index(config, tmp_path / f"run{n}.log", point) is None, "the run ended before the kill point"
        done_at_kill.append(progress(config))
        if n:  # each run after a kill starts at the chunk the last one finished
            assert resumed_at(tmp_path / f"run{n}.log") == done_at_kill[n - 1]
    assert 3 <= done_at_kill[0] < done_at_kill[1] < done_at_kill[2] < 25
    # a fourth kill once the embedding file is published (FAISS or BM25 being built)
    assert index(config, tmp_path / "run3.log", sidecar.exists) is None, "the fourth run ended before its kill"
    assert resumed_at(tmp_path / "run3.log") == done_at_kill[2]
    assert index(config, tmp_path / "last.log") == 0

    clean = project(tmp_path / "clean")
    assert index(clean, tmp_path / "clean.log") == 0
    a, b = (np.load(p.parent / "out" / "embedding.npy") for p in (config, clean))
    assert np.array_equal(a, b)
    assert not list((config.parent / "out").glob(".embedding.npy.partial*"))
    killed, fresh = engine_for(config), engine_for(clean)
    killed.init()
    fresh.init()
    assert killed.status()["dense_index"] == fresh.status()["dense_index"] == 400
    assert killed.docs.ids == fresh.docs.ids
    queries = ["vitamin D deficiency", "stem cells in the bone marrow", "antibiotic resistance"]
    for search in ("search", "bm25_search"):
        got, want = getattr(killed, search)(queries, 10), getattr(fresh, search)(queries, 10)
        assert [[(h.id, round(h.score, 5)) for h in q] for q in got] == [[(h.id, round(h.score, 5)) for h in q]
                                                                           for q in want]
