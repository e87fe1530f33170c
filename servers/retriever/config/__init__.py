"""Typed models of parameter.yaml; `load_config(path, overrides)`.

Keys follow the UltraRAG retriever server. Unknown keys are errors that name the file, the key
path and the valid choices. Relative paths resolve against the YAML file's folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..errors import ConfigError
from .base import ResolvedPath, Section, none_as_empty
from .milvus import MilvusConfig
from .minilm import MINILM_ALIASES, resolved_model  # noqa: F401  (MINILM_ALIASES re-exported)
from .ranking import RerankConfig, SparseConfig
from .serving import (
    ChunkingConfig,
    DeployConfig,
    LimitsConfig,
    LLMConfig,
    RemoteConfig,
    ReplyConfig,
    SecurityConfig,
    ToolsConfig,
)
from .sources import SourceConfig, check_sources
from .websearch import ExaConfig, TavilyConfig, WebsearchConfigs, ZhipuAIConfig  # noqa: F401  (re-exported)

# The index backends: each name has its case in indexes.backend_for (mypy checks the match is exhaustive).
IndexBackendName = Literal["faiss", "milvus"]
INDEX_BACKENDS: tuple[str, ...] = get_args(IndexBackendName)


class STEncode(Section):
    normalize_embeddings: bool = True
    encode_chunk_size: int = Field(2048, ge=1)
    q_prompt_name: str | None = "query"
    psg_prompt_name: str | None = "document"
    q_task: str | None = None
    psg_task: str | None = None


Runtime = Literal["auto", "torch", "onnx", "openvino", "static"]
Precision = Literal["auto", "fp32", "bf16", "int8"]


class STConfig(Section):
    trust_remote_code: bool = False
    # auto: the fastest variant that keeps quality (bench/RESULTS.md, "Embedding runtimes"):
    # OpenVINO bf16 on CPUs with AMX / AVX512-BF16, torch fp32 elsewhere; the reason is logged and
    # shown by retriever_init. onnx and openvino run a graph exported once from the model into
    # cache_dir; static is a model2vec model distilled once from it (much faster, lower quality).
    runtime: Runtime = "auto"
    # torch: fp32 | bf16; onnx: fp32 | int8; openvino: fp32 | bf16; auto: chosen with the runtime
    precision: Precision = "auto"
    max_seq_length: int | None = Field(None, ge=8)  # word pieces kept per text; empty: the model's own
    static_dimensions: int = Field(256, ge=8)  # PCA dimensions of a distilled static model
    cache_dir: ResolvedPath | None = None  # exported / distilled models; empty: $RETRIEVER_CACHE_DIR, ~/.cache/mcp-retriever
    sentence_transformers_encode: STEncode = STEncode()


class HTTPEmbedConfig(Section):
    """What every backend that embeds through an OpenAI-compatible /embeddings endpoint shares."""

    api_key: SecretStr | None = None  # empty: $RETRIEVER_API_KEY, then $OPENAI_API_KEY; never logged
    concurrency: int = Field(8, ge=1)  # requests in flight at once
    timeout: float = Field(60.0, gt=0)  # seconds per request
    max_retries: int = Field(3, ge=0)  # for connection errors, timeouts, 429 and 5xx (backoff with jitter)
    batch_size: int | None = Field(None, ge=1)  # texts per request; empty: the top-level batch_size


class OpenAIConfig(HTTPEmbedConfig):
    model_name: str = "text-embedding-3-small"
    base_url: str = "https://api.openai.com/v1"


class InfinityConfig(HTTPEmbedConfig):
    url: str | None = None  # an `infinity_emb v2` server, e.g. http://127.0.0.1:7997 (plus its --url-prefix)
    model_name: str | None = None  # the server's --served-model-name; empty: model_name_or_path
    # UltraRAG's keys for the in-process engine: accepted, and set on the infinity_emb command line instead.
    bettertransformer: bool = False
    pooling_method: str = "auto"
    model_warmup: bool = False
    trust_remote_code: bool = False
    device: str | None = None


class BM25Config(Section):
    lang: Literal["en", "zh"] = "en"
    tokenizer: Literal["auto", "default", "jieba", "character"] = "auto"  # auto: jieba for zh, default otherwise
    save_path: ResolvedPath = Path("index/bm25")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    # adds and deletes since bm25_index, as a fraction of its documents, past which a change
    # rebuilds BM25 in full; below it added documents are a delta (search/bm25.py Delta). 0: always rebuild
    rebuild_fraction: float = Field(0.1, ge=0)


class BackendConfigs(Section):
    sentence_transformers: STConfig = STConfig()
    bm25: BM25Config = BM25Config()
    openai: OpenAIConfig = OpenAIConfig()
    infinity: InfinityConfig = InfinityConfig()


class FaissConfig(Section):
    index_factory: str = "Flat"  # a FAISS index_factory string with inner product: Flat (exact), HNSW32, IVF1024,Flat...
    nprobe: int | None = Field(None, ge=1)  # IVF indexes: lists searched per query (FAISS's default: 1)
    ef_search: int | None = Field(None, ge=1)  # HNSW indexes: candidates kept while searching (FAISS's default: 16)
    index_use_gpu: bool = False
    index_chunk_size: int = Field(10000, ge=1)
    index_path: ResolvedPath = Path("index/faiss")


class IndexBackendConfigs(Section):
    faiss: FaissConfig = FaissConfig()
    milvus: MilvusConfig = MilvusConfig()

    @field_validator("milvus")
    @classmethod
    def _milvus_uri(cls, value: MilvusConfig, info: ValidationInfo) -> MilvusConfig:
        """A Milvus Lite path resolves against the YAML's folder like every other path."""
        base = (info.context or {}).get("base_dir")
        if base is None or "://" in value.uri or Path(value.uri).is_absolute():
            return value
        return value.model_copy(update={"uri": str(Path(base) / value.uri)})


class HybridConfig(Section):
    """Dense + BM25 fusion (an extension of the UltraRAG keys)."""

    # adaptive: cosine + BM25 over its query's bound, weighted per query (fusion.py; bench/QUALITY.md)
    fusion: Literal["adaptive", "rrf", "convex"] = "adaptive"
    rrf_k: float = Field(60, ge=0, le=1e6)
    # the dense share (adaptive: the prior, each query's shares kept within 0.4..1.6 times their priors;
    # fusion.adaptive_weights); BM25 gets the rest. null: auto, 0.5 unless the collection's
    # self-retrieval check finds one retriever cannot read it (calibration.py)
    vector_weight: float | None = Field(None, ge=0, le=1)
    candidate_depth: int = Field(500, ge=1)  # how deep each retriever searches before fusing (bench/QUALITY.md)
    # adaptive: a query whose best BM25 document dense ranks far below its own best leans on dense
    # (search/signals.py; bench/QUALITY.md, issue 32)
    cross_check: bool = False
    # adaptive: where the collection's recent queries mostly find BM25's best document far down
    # dense's list (name-like queries over descriptions), a query without a strong BM25 match is
    # answered in dense's order (search/signals.py's query gate; bench/QUALITY.md, issue 32)
    query_gate: bool = True


COLLECTION_NAME = re.compile(r"[A-Za-z0-9_]{1,255}")  # used with fullmatch: "abc\n" is refused


def _collection_name(value: str) -> str:
    if value and not COLLECTION_NAME.fullmatch(value):
        raise ValueError(f"collection names use only letters, digits and _ (at most 255), got {value!r}")
    return value


@dataclass(frozen=True)
class CollectionPaths:
    """Where one collection's files live."""

    embedding: Path
    faiss: Path
    bm25: Path
    docs: Path  # the change log: documents added and deleted since the corpus file


WebProvider = Literal["exa", "tavily", "zhipuai"]


class Config(Section):
    model_name_or_path: str = ""
    # null or "": no corpus file, a collection filled by retriever_add
    corpus_path: Annotated[ResolvedPath | None, BeforeValidator(lambda v: None if v == "" else v)] = Path(
        "data/sample_corpus.jsonl")
    embedding_path: ResolvedPath = Path("index/embedding.npy")
    docs_path: ResolvedPath = Path("index/docs")  # the default collection's change log (added/deleted documents)
    collection_name: Annotated[str, AfterValidator(_collection_name)] = ""
    duplicate_ids: Literal["error", "number"] = "error"  # number: the n-th repeat of id X in the corpus is X#n
    collections_path: ResolvedPath = Path("index/collections")  # named collections: one folder each
    backend: Literal["sentence_transformers", "openai", "infinity", "bm25"] = "sentence_transformers"
    backend_configs: BackendConfigs = BackendConfigs()
    index_backend: IndexBackendName = "faiss"
    index_backend_configs: IndexBackendConfigs = IndexBackendConfigs()
    hybrid: HybridConfig = HybridConfig()
    batch_size: int = Field(64, ge=1)
    top_k: int = Field(5, ge=1)
    gpu_ids: str | int | None = None
    query_instruction: str = ""
    is_multimodal: bool = False
    overwrite: bool = False
    retriever_url: str | None = None  # a `retriever deploy` service, for retriever_deploy_search
    retrieve_thread_num: int = Field(1, ge=1)  # active: web search queries in flight at once
    is_demo: bool = False
    # Web search (active): retriever_websearch's default provider and each provider's options.
    websearch_backend: WebProvider | None = None
    websearch_backend_configs: Annotated[WebsearchConfigs, BeforeValidator(none_as_empty)] = WebsearchConfigs()
    security: Annotated[SecurityConfig, BeforeValidator(none_as_empty)] = SecurityConfig()
    limits: Annotated[LimitsConfig, BeforeValidator(none_as_empty)] = LimitsConfig()
    reply: Annotated[ReplyConfig, BeforeValidator(none_as_empty)] = ReplyConfig()
    chunking: Annotated[ChunkingConfig, BeforeValidator(none_as_empty)] = ChunkingConfig()
    deploy: Annotated[DeployConfig, BeforeValidator(none_as_empty)] = DeployConfig()
    remote: Annotated[RemoteConfig, BeforeValidator(none_as_empty)] = RemoteConfig()
    llm: Annotated[LLMConfig, BeforeValidator(none_as_empty)] = LLMConfig()
    tools: Annotated[ToolsConfig, BeforeValidator(none_as_empty)] = ToolsConfig()
    # a cross-encoder stage on every search; a learned-sparse retriever (config/ranking.py)
    rerank: Annotated[RerankConfig, BeforeValidator(none_as_empty)] = RerankConfig()
    sparse: Annotated[SparseConfig, BeforeValidator(none_as_empty)] = SparseConfig()
    # folders of files kept in sync with a collection (`retriever sync`, config/sources.py)
    sources: Annotated[list[SourceConfig], BeforeValidator(lambda v: [] if v is None else v)] = []
    # UltraRAG's client fills `path` (the server's launcher) into a server's parameter file; kept, unused
    path: str | None = None

    @model_validator(mode="after")
    def _sources_distinct(self) -> Config:
        check_sources(self.sources, self.collection_name)
        return self

    @model_validator(mode="after")
    def _demo_needs_milvus(self) -> Config:
        if self.is_demo and self.index_backend != "milvus":
            raise ValueError("is_demo keeps every document in Milvus: set index_backend: milvus")
        if self.index_backend_configs.milvus.full_text and self.index_backend != "milvus":
            raise ValueError("index_backend_configs.milvus.full_text keeps every document in Milvus: set "
                             "index_backend: milvus")
        return self

    @model_validator(mode="after")
    def _images_have_no_text(self) -> Config:
        if self.is_multimodal and self.backend == "bm25":
            raise ValueError("is_multimodal: images have no text for BM25; set backend: sentence_transformers with "
                             "an image-text model")
        if self.is_multimodal and self.chunking.by != "none":
            raise ValueError("is_multimodal: images are not cut into chunks; set chunking.by: none")
        return self

    def endpoints(self) -> set[str]:
        """Dotted keys of the settings that say where requests go, or the credentials they carry."""
        keys = {"backend_configs.openai.base_url", "backend_configs.openai.api_key", "backend_configs.infinity.url",
                "backend_configs.infinity.api_key", "index_backend_configs.milvus.token", "retriever_url",
                "remote.token", "remote.token_env", "llm.base_url", "llm.api_key", "rerank.url", "rerank.api_key"}
        keys |= {f"websearch_backend_configs.{p}.{k}" for p in ("exa", "tavily", "zhipuai") for k in ("api_key", "base_url")}
        if "://" in self.index_backend_configs.milvus.uri:  # a server; a path is Milvus Lite's file
            keys.add("index_backend_configs.milvus.uri")
        return keys

    def local_paths(self) -> dict[str, Path]:
        """Dotted key -> file or folder of the settings that name places on this machine."""
        out = {"corpus_path": self.corpus_path, "embedding_path": self.embedding_path, "docs_path": self.docs_path,
               "collections_path": self.collections_path, "backend_configs.bm25.save_path": self.backend_configs.bm25.save_path,
               "index_backend_configs.faiss.index_path": self.index_backend_configs.faiss.index_path,
               "security.http.tokens_file": self.security.http.tokens_file,
               "backend_configs.sentence_transformers.cache_dir": self.backend_configs.sentence_transformers.cache_dir,
               "sparse.save_path": self.sparse.save_path}
        if "://" not in self.index_backend_configs.milvus.uri:
            out["index_backend_configs.milvus.uri"] = Path(self.index_backend_configs.milvus.uri)
        return {k: v for k, v in out.items() if v is not None}

    def index_folders(self) -> list[Path]:
        """Where this configuration writes indexes: the selected collection's folders, the named
        collections' root, Milvus Lite's folder."""
        paths = self.paths()
        folders = [paths.embedding.parent, paths.faiss, paths.bm25, paths.docs, self.collections_path]
        lite = self.local_paths().get("index_backend_configs.milvus.uri")
        return folders + ([lite.parent] if lite is not None else [])

    def resolved_model(self) -> str:
        """The model folder: the packaged MiniLM for an empty value or a MiniLM alias (minilm.py)."""
        return resolved_model(self.model_name_or_path)

    def paths(self) -> CollectionPaths:
        """The selected collection's files: the configured paths for the default collection (no
        name), `collections_path/<name>/...` for a named one."""
        if not self.collection_name:
            return CollectionPaths(self.embedding_path, self.index_backend_configs.faiss.index_path,
                                   self.backend_configs.bm25.save_path, self.docs_path)
        root = self.collections_path / self.collection_name
        return CollectionPaths(root / "embedding.npy", root / "faiss", root / "bm25", root / "docs")

    def with_overrides(self, overrides: dict[str, Any], base_dir: Path | None = None) -> Config:
        """A new config with `overrides` deep-merged in (None values are ignored)."""
        data = deep_merge(self.model_dump(), {k: v for k, v in overrides.items() if v is not None})
        return validate_config(data, source="tool arguments", base_dir=base_dir)


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of `loc`, for listing valid keys."""
    model: type[BaseModel] = Config
    ann: Any = None
    for part in loc[:-1]:
        if ann is not None and (isinstance(part, int) or _container(ann)):  # an item of a list or a dict
            ann = _section_in(ann)
        else:
            field = model.model_fields.get(str(part))
            ann = field.annotation if field else None
        section = _section_in(ann)
        if section is None:
            return None
        if not _container(ann):
            model, ann = section, None
    return model if ann is None else None


def _container(ann: Any) -> bool:
    return get_origin(ann) in (list, dict)


def _section_in(ann: Any) -> type[BaseModel] | None:
    """The section a list, a dict or an optional holds (`list[PrincipalConfig]`, `OAuthConfig | None`)."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    inner = [a for a in get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
    return inner[-1] if inner else None


def _describe(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        owner = _model_at(loc)
        valid = ", ".join(owner.model_fields) if owner else "?"
        return f"unknown key '{path}'; valid keys here: {valid}"
    value = err.get("input")
    if not loc:  # a check of the whole configuration: its message says it all
        return str(err["msg"]).removeprefix("Value error, ")
    if _secret_path(path) or isinstance(value, (dict, list)) or (
            isinstance(value, str) and err["type"] in ("model_type", "dict_type", "model_attributes_type")):
        # never echo a secret, nor a value given where a section was expected (it may be a key)
        return f"'{path}': {err['msg']} (got a {type(value).__name__})"
    return f"'{path}': {err['msg']} (got {value!r})"


SECRET_KEYS = ("api_key", "token", "tokens", "token_sha256")  # a hash is no secret, but a token pasted there is


def _secret_path(path: str) -> bool:
    return any(part in SECRET_KEYS for part in path.split("."))


def validate_config(data: Any, source: str, base_dir: Path | None = None) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, got {type(data).__name__}")
    try:
        return Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as e:
        problems = "; ".join(_describe(err) for err in e.errors())
        raise ConfigError(f"{source}: {problems}") from None


def load_config(path: str | Path = "parameter.yaml", overrides: dict[str, Any] | None = None,
                base_dir: Path | None = None) -> Config:
    """Read and validate a parameter.yaml; relative paths resolve against `base_dir` (default:
    its folder)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} (pass --config PATH)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if overrides:
        data = deep_merge(data or {}, {k: v for k, v in overrides.items() if v is not None})
    return validate_config(data, source=str(path), base_dir=base_dir or path.resolve().parent)
