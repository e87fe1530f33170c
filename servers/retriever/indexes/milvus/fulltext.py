"""Full text in Milvus (`index_backend_configs.milvus.full_text: true`): BM25 computed by Milvus.

Who analyses the text is `full_text_analyzer`. `bm25s` (the default): this server does, as the
local BM25 does (terms.py), and writes the terms into a field of their own (`terms`) that
Milvus's BM25 function reads; Milvus then scores the terms bm25s would (SciFact: bench/RESULTS.md
"fulltext-scifact"). `milvus`: Milvus's analyzer reads the text field itself, as follows.

The analysed field is a VARCHAR with `enable_analyzer`; a BM25 Function turns it into a
SPARSE_FLOAT_VECTOR field, which Milvus fills itself on every insert or upsert, indexes
(SPARSE_INVERTED_INDEX, metric BM25, `bm25_k1` / `bm25_b` from backend_configs.bm25) and searches
with the query's text. Milvus analyses the query with the field's analyzer.

The analyzer follows `backend_configs.bm25.lang`: for `en` the standard tokenizer, lowercase,
bm25s's English stop words and the English Snowball stemmer; for `zh` (or `tokenizer: jieba`) the
jieba tokenizer and bm25s's Chinese stop words. A Milvus server (2.5 or newer) applies all of it;
Milvus Lite 3.2.2 knows only the `standard` and `jieba` tokenizers with a stop-word filter, and
skips the stemmer: on Lite English BM25 matches words, not stems. `tokenizer: character` has no
Milvus analyzer and is refused.

Scores: Milvus's BM25 is Lucene's idf times tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
(bm25s's `lucene` without the (k1 + 1) factor: the same order), so `bm25.method` is not used here.
Milvus Lite 3.2.2 reports a BM25 hit's distance as minus its score, a server as the score: hits
carry the score either way. Milvus Lite keeps BM25 statistics (N, avgdl, df) per segment, not per
collection (its own TODO in engine/collection.py), so a collection written in several flushes
scores slightly differently from one built at once.

pymilvus and bm25s's stop words are imported only when a full_text collection is made or checked.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import IndexMismatchError
from .client import MilvusError, MilvusVersionError, display, load_pymilvus

if TYPE_CHECKING:
    from ...config import BM25Config
    from .terms import Terms

log = logging.getLogger(__name__)
FUNCTION = "mcp_retriever_bm25"
UPGRADE = ("full_text needs Milvus's BM25 function (Milvus 2.5 or newer, or Milvus Lite 3.x): upgrade the Milvus "
           "server, or set index_backend_configs.milvus.full_text: false (BM25 and hybrid then need a local corpus, "
           "is_demo: false)")


@dataclass(frozen=True)
class FullText:
    """How a collection's text becomes a BM25 sparse vector in Milvus."""

    sparse_field: str = "sparse"
    analyzer: dict[str, Any] = field(default_factory=dict)
    k1: float = 1.5
    b: float = 0.75
    lang: str = "en"
    terms_field: str | None = None  # full_text_analyzer bm25s: the field of our terms, which BM25 reads
    terms: Terms | None = field(default=None, compare=False, repr=False)  # makes them (terms.py)

    def record(self) -> dict[str, Any]:
        """What a collection's info records (a change of any of these needs a rebuild)."""
        out = {"sparse_field": self.sparse_field, "lang": self.lang, "analyzer": self.analyzer, "k1": self.k1,
               "b": self.b}
        return out if self.terms_field is None else {**out, "terms_field": self.terms_field, "terms": "bm25s"}

    def text_params(self) -> dict[str, Any]:
        """The text field's extra schema parameters (none when our terms have a field of their own)."""
        return {} if self.terms_field else {"enable_analyzer": True, "analyzer_params": self.analyzer}

    def analysed(self, texts: list[str]) -> list[str]:
        """What Milvus's BM25 reads for `texts` (documents or queries): our terms, or the texts."""
        return texts if self.terms is None else self.terms.many(texts)

    def add_to(self, schema: Any, index: Any, text_field: str, max_length: int = 65535) -> None:
        """The sparse field, the BM25 function that fills it from `text_field` (or from the terms
        field, added here), and its index."""
        pymilvus = load_pymilvus()
        source = text_field
        if self.terms_field:
            source = self.terms_field
            schema.add_field(source, pymilvus.DataType.VARCHAR, max_length=max_length, enable_analyzer=True,
                             analyzer_params=self.analyzer)
        schema.add_field(self.sparse_field, pymilvus.DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(pymilvus.Function(name=FUNCTION, function_type=pymilvus.FunctionType.BM25,
                                              input_field_names=[source], output_field_names=[self.sparse_field]))
        index.add_index(field_name=self.sparse_field, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                        params={"inverted_index_algo": "TAAT_NAIVE", "bm25_k1": self.k1, "bm25_b": self.b})

    def search_params(self) -> dict[str, Any]:
        return {"metric_type": "BM25", "params": {}}


def full_text_of(cfg: BM25Config, sparse_field: str, terms_field: str | None = None) -> FullText:
    """The analyzer and BM25 parameters `backend_configs.bm25` asks for, as Milvus takes them.
    With `terms_field` (full_text_analyzer bm25s) the terms are ours and Milvus only splits them."""
    from ...errors import InvalidInputError
    from ..bm25 import tokenizer_name

    if terms_field:
        from .terms import Terms

        return FullText(sparse_field, {"tokenizer": "standard"}, cfg.k1, cfg.b, cfg.lang, terms_field, Terms(cfg))
    tokenizer = tokenizer_name(cfg)
    if tokenizer == "character":
        raise InvalidInputError("index_backend_configs.milvus.full_text: Milvus has no per-character analyzer; set "
                                "backend_configs.bm25.tokenizer to auto, default or jieba")
    if cfg.lang == "zh":
        from bm25s.stopwords import STOPWORDS_CHINESE

        stop = sorted(STOPWORDS_CHINESE)
    else:
        from bm25s.stopwords import STOPWORDS_EN

        stop = sorted(STOPWORDS_EN)
    filters: list[Any] = ["lowercase", {"type": "stop", "stop_words": stop}]
    if tokenizer == "jieba":
        analyzer: dict[str, Any] = {"tokenizer": "jieba", "filter": filters}
    else:
        if cfg.lang == "en":
            filters.append({"type": "stemmer", "language": "english"})
        analyzer = {"tokenizer": "standard", "filter": filters}
    return FullText(sparse_field, analyzer, cfg.k1, cfg.b, cfg.lang)


def check_collection(store: Any, ft: FullText) -> None:
    """An existing collection (`store`: a milvus.MilvusStore) has the BM25 function this mode searches (else it was made without
    full_text, or by a Milvus that dropped the function)."""
    desc = store._call("describe_collection", store._client.describe_collection, store.collection)
    for fn in desc.get("functions") or []:
        kind = fn.get("type")
        if ft.sparse_field in (fn.get("output_field_names") or []) and getattr(kind, "name", kind) == "BM25":
            return
    raise IndexMismatchError(
        f"Milvus collection {store.collection!r} has no BM25 function filling {ft.sparse_field!r}: it was made without "
        "full_text; call retriever_index(overwrite=true) to rebuild it, or pick another collection_name")


def probe(store: Any, ft: FullText) -> None:
    """Capability check, not a version guess: create a scratch collection with a BM25 function,
    read it back, drop it. A Milvus without the function refuses the schema (2.3: no sparse
    vectors) or drops the function it does not know (2.4); either way full_text is refused with
    what to upgrade."""
    pymilvus = load_pymilvus()
    client, name = store._client, f"mcp_retriever_probe_{uuid.uuid4().hex[:12]}"
    fields = store.fields
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(fields.id, pymilvus.DataType.VARCHAR, is_primary=True, max_length=64)
    schema.add_field(fields.vector, pymilvus.DataType.FLOAT_VECTOR, dim=2)
    schema.add_field(fields.text, pymilvus.DataType.VARCHAR, max_length=64, **ft.text_params())
    index = client.prepare_index_params()
    index.add_index(field_name=fields.vector, index_type="FLAT", metric_type="IP")
    ft.add_to(schema, index, fields.text, 64)
    where = display(store.uri)
    try:
        client.create_collection(name, schema=schema)
    except Exception as e:
        version = _version(client)
        raise MilvusVersionError(f"the Milvus at {where} ({version}) cannot keep a BM25 function: {e}. {UPGRADE}") from e
    try:
        desc = client.describe_collection(name)
        kept = any(ft.sparse_field in (fn.get("output_field_names") or []) for fn in desc.get("functions") or [])
    except Exception as e:
        raise MilvusError(f"probing full-text search on the Milvus at {where} failed: {e}") from e
    finally:
        try:
            client.drop_collection(name)
        except Exception as e:  # the probe's own scratch collection; nothing else is touched
            log.warning("could not drop the scratch collection %s of the full-text probe: %s", name, e)
    if not kept:
        raise MilvusVersionError(f"the Milvus at {where} ({_version(client)}) accepted but dropped the BM25 function. "
                                 f"{UPGRADE}")


def _version(client: Any) -> str:
    try:
        return str(client.get_server_version())
    except Exception:
        return "version unknown"
