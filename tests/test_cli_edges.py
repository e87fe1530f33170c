"""The command line as a new user meets it: errors that name the fix (the command to run, the
flag that is wrong), no raw library errors, no model loaded for what needs none, help on every
command, `--version`. In process (retriever.main.main), so the suite stays fast."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from retriever import main as cli
from retriever import package_version as server_version
from retriever.testing.projects import write_project


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:  # argparse's own exits (usage errors, --version, --help)
        code = int(e.code or 0)
    assert gc.isenabled(), "the command left garbage collection off (memory.start_up)"
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading an embedding model fails the test."""
    import retriever.session

    def refuse(cfg: object) -> None:
        raise AssertionError("an embedding model was loaded")

    monkeypatch.setattr(retriever.session, "build_embedder", refuse)


def test_a_set_typo_is_blamed_on_set(project: Path, capsys: pytest.CaptureFixture[str], no_model: None) -> None:
    code, _, err = run(capsys, "search", "tides", "--config", str(project), "--set", "topk=3")
    assert code == 2 and "--set: unknown key 'topk'" in err and "parameter.yaml" not in err


def test_k_zero_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str], no_model: None) -> None:
    code, _, err = run(capsys, "search", "tides", "--config", str(project), "-k", "0")
    assert code == 2 and "argument -k: must be at least 1" in err and "pydantic" not in err


def test_search_before_indexing_says_retriever_index(project: Path, capsys: pytest.CaptureFixture[str],
                                                     no_model: None) -> None:
    code, _, err = run(capsys, "search", "tides", "--config", str(project), "--mode", "bm25")
    assert code == 2 and "`retriever index`" in err and "call bm25_index" not in err


def test_bm25_search_loads_no_model_and_no_hits_is_said(built_project: Path, capsys: pytest.CaptureFixture[str],
                                                        no_model: None) -> None:
    code, out, _ = run(capsys, "search", "earthquakes", "--config", str(built_project), "--mode", "bm25", "-k", "1")
    assert code == 0 and "[doc11]" in out
    code, out, err = run(capsys, "search", "zzqxv", "--config", str(built_project), "--mode", "bm25")
    assert code == 1 and out == "" and "no hits for 'zzqxv'" in err


def test_add_of_a_missing_file_fails_before_the_model(project: Path, capsys: pytest.CaptureFixture[str],
                                                       no_model: None) -> None:
    code, _, err = run(capsys, "add", "nothere.jsonl", "--config", str(project))
    assert code == 2 and "no file nothere.jsonl" in err and "Errno" not in err


def test_version_and_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"retriever {server_version()}"
    commands = cli.parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    helps = {a.dest: a.help for a in commands._choices_actions}
    assert set(helps) == set(commands.choices) and all(helps.values())
    for name, sub in commands.choices.items():
        undocumented = [a.dest for a in sub._actions if not a.help and a.dest != "help"]
        assert undocumented == [], (name, undocumented)


def test_index_then_search_from_a_fresh_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_project(tmp_path / "p")
    assert run(capsys, "index", "--config", str(config), "--mode", "bm25")[0] == 0
    code, out, _ = run(capsys, "search", "what causes earthquakes", "--config", str(config), "--mode", "bm25",
                       "--json")
    assert code == 0 and '"doc11"' in out
