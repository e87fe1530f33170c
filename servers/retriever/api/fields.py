"""The tool parameters, each described once: the descriptions land in every tool's input schema,
so an agent reading `tools/list` knows the meaning, default and range of what it sends."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from ..search.kinds import MODES

# ---- typed JSON where the server takes free-form objects (strict-mode-friendly schemas) ---------

SCALAR = {"type": ["string", "number", "boolean", "null"]}
# A metadata value: a scalar, a list of scalars (filters' `in` and `==` compare those), or an object
# (filters reach into it with dots: meta.a.b); a list of lists or of objects is refused.
META_VALUE = {"type": [*SCALAR["type"], "array", "object"], "items": SCALAR}


def _meta_value(value: Any) -> Any:
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        raise ValueError("a metadata list holds strings, numbers, booleans or nulls (a filter compares those), "
                         "not lists or objects; use an object (filters reach into it: meta.<key>.<subkey>)")
    return value


MetaValue = Annotated[Any, AfterValidator(_meta_value), WithJsonSchema(META_VALUE)]
MetadataMap = dict[str, MetaValue]


def _document(doc: dict[str, Any]) -> dict[str, Any]:
    """A document's `metadata` object holds metadata values too (its fields are the document's)."""
    meta = doc.get("metadata")
    if isinstance(meta, dict):
        for value in meta.values():
            _meta_value(value)
    return doc


# `metadata` (an object) is a metadata value too: its own values are checked as the document's (_document)
DOCUMENT = {"type": "object", "properties": {"id": {"type": ["string", "integer"]}, "contents": {"type": "string"}},
            "additionalProperties": META_VALUE}
Document = Annotated[MetadataMap, AfterValidator(_document), WithJsonSchema(DOCUMENT)]


Queries = Annotated[list[str] | str, Field(
    description="One query, or a list of queries; the reply has one list of hits per query, in order.")]
BatchQueries = Annotated[list[list[str] | str], Field(
    description="Groups of queries (each a list, or one string); the reply keeps the groups (keys end in _ls).")]
QuestionList = Annotated[list[list[str] | str], Field(
    description="Per question, its phrasings (a list, or one string); their rankings are fused into one per question.")]
TopK = Annotated[int | None, Field(
    ge=1, description="Hits per query, best first. Default: top_k in parameter.yaml (5).")]
QueryInstruction = Annotated[str | None, Field(
    description="Text put before each query before embedding (e.g. 'query: '). Default: query_instruction in "
    "parameter.yaml (empty).")]
ScoreThreshold = Annotated[Annotated[float, Field(allow_inf_nan=False)] | None, Field(
    description="Drop hits scoring below this (after scale_score, if set). Default: none.")]
ScaleScore = Annotated[bool, Field(
    description="Map scores to 0..1 (dense cosine: (s+1)/2; BM25: expit(s/8); adaptive fusion: (s+1)/2; rrf and "
    "convex fusion: divided by the best possible score). Default: false.")]
# Listed as an open object with its shape in words: a closed listing costs every agent 1,340 bytes of
# tool definitions per turn (search and delete_documents), and a recursive one stops LlamaIndex's MCP
# adapter (RecursionError): filters.parse checks the shape and names a malformed filter's problem.
Filters = Annotated[dict[str, Any] | None, Field(
    description="Only documents matching this filter: {'field': 'meta.<key>' or 'id', 'operator': one of ==, !=, "
    ">, >=, <, <=, in, not in, 'value': ...}, or {'operator': 'AND'|'OR'|'NOT', 'conditions': [...]}. A missing "
    "field does not match. Default: none.")]
ReturnText = Annotated[bool, Field(
    description="Include the passages (ret_psg). false: ids and scores only, a much smaller reply. Default: true.")]
ReturnMetadata = Annotated[bool, Field(
    description="Include each hit's metadata (ret_meta): the corpus record's other fields. Default: false.")]
Fusion = Annotated[Literal["adaptive", "rrf", "convex"] | None, Field(
    description="How dense and BM25 rankings merge: adaptive (cosine plus BM25 over the query's highest possible "
    "score, each weighted per query by how far its best hits stand out, vector_weight the prior), rrf (sum of "
    "w/(rrf_k+rank)) or convex (weighted min-max normalised scores). Default: hybrid.fusion in parameter.yaml "
    "(adaptive).")]
VectorWeight = Annotated[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None, Field(
    description="The dense share of the fusion, 0..1; BM25 gets the rest. rrf and convex use it as given; adaptive "
    "takes it as the prior and weights each query by how far each list's best hits stand out, each share kept "
    "within 0.4..1.6 times its prior. Default: hybrid.vector_weight, null = auto: 0.5 unless the collection's "
    "self-retrieval check finds one retriever cannot read it.")]
RRFK = Annotated[Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] | None, Field(
    description="RRF's k: larger flattens the rank curve. 0..1e6. "
    "Default: hybrid.rrf_k (60).")]
CandidateDepth = Annotated[int | None, Field(
    ge=1, description="How deep each ranking is searched before fusing. Default: hybrid.candidate_depth (500).")]
NProbe = Annotated[int | None, Field(
    ge=1, le=65536, description="FAISS IVF and Milvus IVF indexes: lists searched per query (more: slower, closer "
    "to exact). Refused for other index types. Default: nprobe in parameter.yaml (FAISS: 1).")]
EfSearch = Annotated[int | None, Field(
    ge=1, le=32768, description="HNSW indexes (FAISS, Milvus): candidates kept while searching (more: slower, closer "
    "to exact; at least top_k). Refused for other index types. Default: ef_search in parameter.yaml (FAISS: 16).")]
Mode = Annotated[Literal[MODES], Field(  # type: ignore[valid-type]
    description="The search each query (or collection) runs: hybrid (dense + BM25 fused), dense or bm25. "
    "Default: hybrid.")]
DeployMode = Annotated[Literal[MODES] | None, Field(  # type: ignore[valid-type]
    description="The search the queries run: hybrid (dense + BM25 fused), dense or bm25. Default: hybrid where "
    "the collection has both indexes, else the one it has.")]
Collections = Annotated[list[str], Field(
    description="Collections to search together ('' = the default one); retriever_list_collections lists them.")]
Overwrite = Annotated[bool | None, Field(
    description="Replace an existing output. Default: overwrite in parameter.yaml (false: refuse).")]
EmbeddingPath = Annotated[str | None, Field(
    description="The .npy embedding file (relative: to parameter.yaml's folder; must be inside the folders the "
    "server allows). Default: the collection's embedding_path.")]
IndexPath = Annotated[str | None, Field(
    description="The FAISS index folder (same rules as embedding_path). Default: the collection's index_path.")]
Documents = Annotated[list[Document], Field(
    description="Documents to add: each {'id', 'contents', ...metadata} (or BEIR 'title'/'text', or a "
    "'metadata' object). An id that exists is replaced.")]
Ids = Annotated[list[str] | str | None, Field(description="Ids of documents to delete (unknown ids are reported).")]
WebBackend = Annotated[Literal["exa", "tavily", "zhipuai"] | None, Field(
    description="The web search provider. Default: websearch_backend in parameter.yaml.")]
ThreadNum = Annotated[int | None, Field(
    ge=1, description="Web queries in flight at once. Default: retrieve_thread_num in parameter.yaml (1).")]
Offset = Annotated[int, Field(
    ge=0, description="Skip each query's first `offset` hits (paging: a cut reply names the next offset). "
    "Default: 0.")]
MaxBytes = Annotated[int | None, Field(
    ge=0, description="Reply budget in JSON bytes: each query keeps its best hits while the reply fits, and a "
    "cut is announced in `truncated`. 0 = no budget (over HTTP capped at what the client accepts). Default: "
    "reply.max_bytes in parameter.yaml (100000, about 25k tokens).")]
MaxChars = Annotated[int | None, Field(
    ge=0, description="Cut each passage to this many characters (0 = whole). Default: reply.max_chars (0).")]

# retriever_init
ModelName = Annotated[str | None, Field(
    description="Embedding model: a MiniLM alias ('minilm') or a model folder inside the allowed folders. "
    "Default: model_name_or_path in parameter.yaml.")]
CorpusPath = Annotated[str | None, Field(
    description="JSONL corpus ({'id', 'contents'} or BEIR) inside the allowed folders; '' = none (a collection "
    "filled by retriever_add). Default: corpus_path in parameter.yaml.")]
Backend = Annotated[str | None, Field(
    description="Embedding backend: sentence_transformers, openai, infinity or bm25. Default: the YAML's.")]
BackendConfigs = Annotated[dict[str, Any] | None, Field(
    description="Per-backend settings, merged over the YAML's (URLs and keys only from the YAML).")]
IndexBackend = Annotated[str | None, Field(description="Index backend: faiss or milvus. Default: the YAML's.")]
IndexBackendConfigs = Annotated[dict[str, Any] | None, Field(
    description="Per-index-backend settings, merged over the YAML's (Milvus URIs and tokens only from the YAML).")]
BatchSize = Annotated[int | None, Field(ge=1, description="Texts per embedding batch. Default: batch_size (64).")]
GpuIds = Annotated[str | int | None, Field(description="GPU ids, e.g. '0' or '0,1'; null = CPU. Default: the YAML's.")]
IsMultimodal = Annotated[bool | None, Field(
    description="An image corpus: records {id, image_path} (relative to the corpus file's folder), embedded with an "
                "image-text model and searched by text; results hold the image's absolute path. Default: the YAML's.")]
IsDemo = Annotated[bool | None, Field(
    description="Milvus demo mode: every document lives in Milvus (index_backend milvus). Default: the YAML's.")]
Searched = Annotated[str | None, Field(
    description="Search this collection ('' = the default one; retriever_list_collections lists them), opened "
    "with the session's model. Default: the one retriever_init opened.")]
RetrieverURL = Annotated[str | None, Field(
    description="The deployed retriever (host:port or a URL; the path becomes /search). Default: retriever_url in "
    "parameter.yaml; another one only where the operator allows it (security.client_endpoints).")]
CollectionName = Annotated[str | None, Field(
    description="The collection to open: letters, digits and _ ('' = the default one). Default: the YAML's.")]
IndexedCollection = Annotated[str | None, Field(
    description="The collection being indexed: must be the one retriever_init opened (UltraRAG passes it). "
    "Default: that one.")]
IndexedCorpus = Annotated[str | None, Field(
    description="The corpus being indexed: must be the one retriever_init opened (UltraRAG passes it). "
    "Default: that one.")]
WebConfigs = Annotated[dict[str, Any] | None, Field(
    description="Overrides of websearch_backend_configs for this call (UltraRAG passes its YAML's); keys and URLs "
    "other than the YAML's only where the operator allows it (security.client_endpoints). Default: the YAML's.")]
UserId = Annotated[str, Field(
    description="The user whose memory is searched: collection user_<id> ('' = 'default').")]
ParameterFile = Annotated[str, Field(
    description="The server's parameter.yaml (UltraRAG passes servers/<name>/parameter.yaml); server.yaml is "
    "written beside it.")]
IngestText = Annotated[str | None, Field(
    description="The document's text (or give `path`); parsed as `format`.")]
DocFormat = Annotated[Literal["text", "markdown", "html", "pdf"], Field(
    description="How to read `text`: text, markdown or html (a PDF comes as a path). Default: text.")]
DocPath = Annotated[str | None, Field(
    description="A document file (.txt, .md, .html, .pdf) inside the folders the server allows (or give `text`).")]
PdfSource = Annotated[str, Field(
    description="A .pdf file or a folder searched for them, inside the folders the server allows.")]
ImageCorpusPath = Annotated[str, Field(
    description="The image corpus to write (.jsonl), inside the folders the server allows; the page images go "
                "under image/<pdf name>/ beside it.")]
SourceId = Annotated[str | None, Field(
    description="The document's id: its chunks are <source_id>:<n>; ingesting it again replaces them. Default with "
    "a path: the file's name.")]
Metadata = Annotated[MetadataMap | None, Field(
    description="Fields kept on every chunk (filterable as meta.<key>).")]
ChunkId = Annotated[str, Field(description="A chunk's id (<source_id>:<n>).")]
Around = Annotated[int, Field(ge=0, le=100, description="How many chunks before / after. Default: 1.")]
Window = Annotated[int, Field(
    ge=0, le=20, description="Per hit, also the `window` chunks before and after it in its document, merged into "
    "one text without repeated overlaps (ret_meta gets window_ids). 0 = the hit alone. Default: 0.")]
AutoMerge = Annotated[Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] | None, Field(
    description="Auto-merging for hierarchical chunks: when more than this share of a parent's children are hits, "
    "the parent replaces them (repeated up the levels). null = off. Default: null.")]

# ---- LLM-assisted retrieval (llm/) ----------------------------------------------------------------


class LLMRerank(BaseModel):
    """LLM reranking of a search's first hits (llm.* in parameter.yaml names the model)."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["listwise", "pointwise"] = Field(
        "listwise", description="listwise: the model orders the passages (a sliding window of batch_size); "
                                "pointwise: the model scores each passage 0-10, batch_size per request.")
    depth: int = Field(20, ge=1, le=100, description="How many of the first hits the model sees; the rest stay behind.")
    batch_size: int = Field(10, ge=2, le=50, description="Passages per request.")


LLMRerankOption = Annotated[LLMRerank | None, Field(
    description="Rerank the first `depth` hits with the LLM (llm section of parameter.yaml). A model that fails "
                "leaves the retrieval order, with a warning. Default: none.")]
Rewrites = Annotated[int, Field(ge=1, le=10, description="Rewrites per query.")]
Rounds = Annotated[int, Field(ge=1, le=5, description="At most this many search rounds per query.")]
Sufficiency = Annotated[float, Field(
    ge=0, le=1, description="Stop when the LLM judges the hits sufficient with at least this confidence.")]
Hops = Annotated[int, Field(ge=1, le=4, description="Hops over the triples from the seed hits.")]
Beam = Annotated[int, Field(ge=1, le=50, description="Triples kept per hop (the best by cosine to the query).")]
SeedK = Annotated[int, Field(ge=1, le=100, description="Seed hits (hop 0) from the `mode` search.")]
TripleIds = Annotated[list[str] | None, Field(
    description="Documents to extract triples from (default: every live document, up to limits.max_documents); "
                "a document's earlier triples are replaced.")]
Description = Annotated[str | None, Field(
    description="What the collection's metadata holds (keys, values). Default: llm.collection_description.")]


def non_finite(value: Any) -> str | None:
    """Where in `value` (`[0].meta`, or '' for itself) a NaN or infinite float is; None where none is."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None
