"""parameter.yaml's sections for serving clients: who may call (security), how big a reply and a
call may be (reply, limits), chunking, the deployed service and its client (deploy, remote)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from .access import OAuthConfig, PrincipalConfig, VisibilityConfig, check_principals
from .base import ResolvedPath, Section


class HTTPSecurity(Section):
    """`retriever serve --transport http`: who may call, from where (docs/security.md)."""

    tokens_env: str = "RETRIEVER_HTTP_TOKENS"  # bearer tokens, comma-separated; several allow rotation
    # or a file, one per line: a plain token (every scope), or `sha256:<hex> [principal]` (a hashed token
    # of a principal below; without one, every scope); re-read when it changes
    tokens_file: ResolvedPath | None = None
    principals: list[PrincipalConfig] = []  # who static tokens belong to: scopes, collections, groups (config/access.py)
    oauth: OAuthConfig | None = None  # OAuth 2.1 resource server: JWT access tokens of one issuer
    allowed_hosts: list[str] = []  # Host header values besides loopback names and the bind address
    allowed_origins: list[str] = []  # browser origins besides http(s)://localhost / 127.0.0.1 on any port
    client_init: bool = False  # true: HTTP clients may call retriever_init with settings other than these
    header_timeout: float = Field(10.0, gt=0)  # seconds for a request's headers, from the connection or the last reply
    body_timeout: float = Field(30.0, gt=0)  # seconds for a request's whole body
    # open at once; one more closes the connection waiting longest for its headers (open files stay free)
    max_connections: int = Field(512, ge=1)

    @model_validator(mode="after")
    def _principals(self) -> HTTPSecurity:
        check_principals(self.principals)
        return self


class SecurityConfig(Section):
    """What a client (a tool call) may reach. The operator (this file, the command line) is trusted."""

    allowed_paths: list[ResolvedPath] = []  # roots for paths in tool calls, besides this file's folder and
    #                                         the index folders configured here
    client_endpoints: bool = False  # true: tool calls may set URLs, URIs, tokens and keys (a key from here or
    #                                 the environment still goes only to the URL from here)
    # model names a tool call may load (retriever_init's model_name_or_path), besides the packaged MiniLM
    # ("", "minilm"), this file's own model and model folders inside the roots above; nothing else is downloaded
    allowed_models: list[str] = []
    read_only: bool = False  # true: the write tools (embed, index, add, delete, ...) are not served
    http: HTTPSecurity = HTTPSecurity()
    # who may see which document (a metadata field of group names); off (None): every caller sees every document
    visibility: VisibilityConfig | None = None


class ReplyConfig(Section):
    """How big one tool reply may be (agent hosts cap a reply at about 25k tokens)."""

    max_bytes: int = Field(100_000, ge=0)  # JSON bytes of hits per reply; 0 = no budget (pipelines). Over HTTP
    #                                        never above HTTP_EVENT_BYTES, what the stock client accepts
    max_chars: int = Field(0, ge=0)  # per passage; 0 = whole passages


class LimitsConfig(Section):
    """Bounds on one call, whoever makes it."""

    max_queries: int = Field(10000, ge=1)  # queries in one call (all groups of a batch together)
    max_results: int = Field(2_000_000, ge=1)  # queries x depth (top_k, or candidate_depth for fused searches)
    max_request_bytes: int = Field(16 * 1024 * 1024, ge=1024)  # the JSON of one call's arguments
    max_documents: int = Field(10000, ge=1)  # documents in one retriever_add
    max_ids: int = Field(1000, ge=1)  # distinct ids one get_document call reads (repeats collapsed first)
    # MCP calls one caller (a bearer token over HTTP) may have running at once; one more is refused
    max_calls_per_caller: int = Field(8, ge=1)
    # chunks one ingested document is cut into: a backstop behind max_file_bytes (in chunks of sync's
    # 128 tokens, a 9.4 MB test log of /usr/share/doc made more than 25,000)
    max_chunks: int = Field(100_000, ge=1)
    max_provider_requests: int = Field(1000, ge=1)  # web search requests one call sends (retries included)
    max_llm_requests: int = Field(1000, ge=1)  # LLM requests one call sends
    max_triples: int = Field(100_000, ge=1)  # triples one retriever_extract_triples call adds
    max_graph_triples: int = Field(500_000, ge=1)  # triples a collection's graph holds
    # documents read by path (retriever_ingest, retriever_build_image_corpus), checked before the heavy work
    max_file_bytes: int = Field(32 * 1024 * 1024, ge=1)  # bytes of one file
    max_pages: int = Field(2000, ge=1)  # pages of one PDF
    max_page_chars: int = Field(200_000, ge=1)  # text of one PDF page (its content stream's bytes bound it first)
    max_page_pixels: int = Field(50_000_000, ge=1)  # pixels of one rendered page (A0 at 144 dpi: 32M)
    max_parse_seconds: float = Field(120.0, gt=0)  # parsing or rendering one file


class ChunkingConfig(Section):
    """Long documents cut into chunks when the corpus is opened (documents/split.py); the chunks
    are the collection's documents: ids `<doc id>:<n>`, the document's fields kept."""

    # token: whole words, counted in the embedding model's tokens, so a chunk fits its window
    by: Literal["none", "sentence", "word", "passage", "token"] = "none"
    length: int = Field(200, ge=1)  # units (sentences, words, passages, tokens) per chunk
    overlap: int = Field(0, ge=0)  # units shared with the previous chunk
    levels: list[Annotated[int, Field(ge=1)]] = []  # a hierarchy instead: decreasing sizes, e.g. [512, 128, 32]

    @model_validator(mode="after")
    def _consistent(self) -> ChunkingConfig:
        if self.by == "none" and (self.levels or self.overlap):
            raise ValueError("chunking: set `by` (sentence, word, passage or token) to use length, overlap or levels")
        if self.by == "token" and self.levels:
            raise ValueError("chunking: levels (a hierarchy) cut by sentence, word or passage, not by token")
        if self.overlap >= self.length:
            raise ValueError(f"chunking: overlap ({self.overlap}) must be below length ({self.length})")
        return self


class DeployConfig(Section):
    """`retriever deploy`: the shared HTTP service (service/). Queries that arrive while a batch is
    being searched wait and are searched together in the next one."""

    max_batch: int = Field(64, ge=1)  # queries searched together (a larger request: this many at a time, alone)
    max_wait_ms: float = Field(5.0, ge=0, le=1000)  # under load: how long a batch waits for the last batch's size
    max_queue: int = Field(256, ge=1)  # requests waiting; past it: 503 with Retry-After
    # requests one caller (a bearer token) may have waiting: a busy caller gets 503 while others are
    # still queued, and the queue takes callers in turn (service/batcher.py)
    max_queue_per_caller: int = Field(64, ge=1)
    request_timeout: float = Field(60.0, gt=0)  # seconds a request may wait and run; then 504, its work dropped


class RemoteConfig(Section):
    """retriever_deploy_search: the client of a deployed retriever at `retriever_url`."""

    token: str | None = None  # the bearer token; or from the environment variable below
    token_env: str = "RETRIEVER_REMOTE_TOKEN"
    timeout: float = Field(60.0, gt=0)  # seconds per request
    max_retries: int = Field(3, ge=0)  # for connection errors, 429 and 5xx (backoff with jitter, Retry-After)


class LLMPrompts(Section):
    """Prompt templates replacing the defaults (llm/prompts.py shows them and their {fields})."""

    rewrite: str | None = None
    judge: str | None = None
    rerank_listwise: str | None = None
    rerank_pointwise: str | None = None
    triples: str | None = None
    filters: str | None = None


class LLMConfig(Section):
    """An OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp's server, OpenAI) for
    query rewriting, agentic search, LLM reranking, triple extraction and filter inference."""

    base_url: str = ""  # e.g. http://127.0.0.1:8000/v1; empty: the LLM tools say to set it
    model: str = ""
    api_key: SecretStr | None = None  # empty: $RETRIEVER_LLM_API_KEY; never logged
    timeout: float = Field(60.0, gt=0)  # seconds per request
    max_retries: int = Field(2, ge=0)  # connection errors, timeouts, 429 and 5xx, with backoff
    concurrency: int = Field(4, ge=1)  # requests in flight at once
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(1024, ge=1)
    json_mode: bool = True  # response_format json_object (servers without it: false)
    collection_description: str = ""  # what filter inference is told about the metadata
    prompts: LLMPrompts = LLMPrompts()


class ToolsConfig(Section):
    """Which tools the MCP server lists (api/registry.py): a profile, plus `include`, less
    `exclude`; `exclude` and read-only mode always win (`retriever serve --tools` overrides)."""

    profile: Literal["agent", "ultrarag", "full"] = "agent"
    include: list[str] = []
    exclude: list[str] = []
