"""What MilvusStore (milvus.py) knows of its collection besides the rows: the `info` `create`
stored (model, dimension, format version), the dimension, whether it answers and is loaded
(`health`), a search's index parameters; and the checks of rows before they are written.

Where the info is kept: a Milvus server keeps collection properties; Milvus Lite's two engines
differ (3.x keeps properties but not descriptions, the 2.5 C++ engine descriptions but not
properties), so for Lite it lives in a JSON file beside the database, `<db>.info.json` (one
process per Lite database writes it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...config.milvus import MilvusFields
from ...errors import IndexMismatchError, InvalidInputError
from ...store.persist import atomic_write_text
from ..base import ANN_PARAMETERS
from .client import display, is_lite

INFO_PROPERTY = "mcp_retriever.info"
FORMAT_VERSION = 1


class CollectionInfo:
    """MilvusStore's collection as a whole; the store gives the attributes and `_call`."""

    collection: str
    uri: str
    fields: MilvusFields
    index_params: dict[str, Any]
    search_params: dict[str, Any]
    _client: Any
    _loaded: bool

    def _call(self, op: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _set_info(self, dimension: int, info: dict[str, Any]) -> None:
        payload = {**info, "dimension": dimension, "format_version": FORMAT_VERSION}
        if is_lite(self.uri):
            self._lite_infos({self.collection: payload})
            return
        self._call("alter_collection_properties", self._client.alter_collection_properties, self.collection,
                   properties={INFO_PROPERTY: json.dumps(payload, sort_keys=True)})

    def _lite_infos(self, changes: dict[str, dict[str, Any] | None] | None = None) -> dict[str, Any]:
        """Milvus Lite: every collection's info in `<db>.info.json`, with `changes` written first
        (None drops a collection's entry)."""
        path = Path(os.path.abspath(self.uri) + ".info.json")
        try:
            infos = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            infos = {}
        if changes:
            for name, payload in changes.items():
                if payload is None:
                    infos.pop(name, None)
                else:
                    infos[name] = payload
            atomic_write_text(path, json.dumps(infos, indent=2, sort_keys=True))
        return infos

    def update_info(self, info: dict[str, Any]) -> None:
        """Replace the stored info (the dimension is the collection's own)."""
        self._set_info(self.dimension(), info)

    def info(self) -> dict[str, Any] | None:
        """What `create` stored (model, dimension, format version), or None when nothing was."""
        if is_lite(self.uri):
            found = self._lite_infos().get(self.collection)
            if isinstance(found, dict):
                return found
            # a collection made before the file (Lite 3.x kept it as a property), else nothing
        desc = self._call("describe_collection", self._client.describe_collection, self.collection)
        raw = (desc.get("properties") or {}).get(INFO_PROPERTY)
        return json.loads(raw) if raw else None

    def dimension(self) -> int:
        desc = self._call("describe_collection", self._client.describe_collection, self.collection)
        for field in desc["fields"]:
            if field["name"] == self.fields.vector:
                return int(field["params"]["dim"])
        raise IndexMismatchError(
            f"Milvus collection {self.collection!r} has no vector field {self.fields.vector!r}; "
            "check vector_field_name"
        )

    def health(self, timeout: float) -> str | None:
        """None when Milvus answers within `timeout` seconds and this collection is loaded (searchable);
        else what is wrong, in words (for /readyz)."""
        where = display(self.uri)
        try:
            state = self._client.get_load_state(self.collection, timeout=timeout)["state"]
        except Exception as e:
            reason = " ".join(str(e).split())[:300]
            return f"the Milvus at {where} does not answer ({type(e).__name__}: {reason})"
        if state.name == "NotExist":
            return f"the Milvus collection {self.collection!r} at {where} does not exist (index it first)"
        if state.name != "Loaded":  # released (a restarted server, another client): load it again
            self._loaded = False
            try:
                self._client.load_collection(self.collection, timeout=timeout)
            except Exception as e:
                reason = " ".join(str(e).split())[:300]
                return f"the Milvus collection {self.collection!r} at {where} is not loaded (state {state.name}): {reason}"
            self._loaded = True
        return None

    def _search_params(self, ann: dict[str, int] | None) -> dict[str, Any]:
        if not ann:
            return self.search_params
        kind = str(self.index_params.get("index_type", "FLAT")).upper()
        names = {"nprobe": ("nprobe", kind.startswith("IVF")), "efSearch": ("ef", kind.startswith("HNSW"))}
        params = dict(self.search_params.get("params") or {})
        for name, value in ann.items():
            key, fits = names[name]
            if not fits:
                raise InvalidInputError(
                    f"{ANN_PARAMETERS[name]}: this Milvus collection's index is {kind}, which has no such parameter; "
                    "nprobe is for IVF_* indexes, ef_search for HNSW (index_params in parameter.yaml)")
            params[key] = value
        return {**self.search_params, "params": params}


def check_rows(f: MilvusFields, ids: Sequence[str], vectors: np.ndarray, texts: Sequence[str],
               metadatas: Sequence[dict[str, Any]]) -> None:
    """Refuse rows an upsert cannot write whole, before anything is written."""
    n = len(ids)
    if getattr(vectors, "ndim", 0) != 2 or len(vectors) != n or len(texts) != n or len(metadatas) != n:
        raise InvalidInputError(
            f"upsert needs as many vectors (2-D), texts and metadatas as ids: {n} ids, "
            f"{len(vectors)} vectors, {len(texts)} texts, {len(metadatas)} metadatas"
        )
    if len(set(ids)) != n:
        dup = next(i for i in ids if list(ids).count(i) > 1)
        raise InvalidInputError(f"upsert got the id {dup!r} twice in one call; pass each id once")
    for i, text, meta in zip(ids, texts, metadatas, strict=True):
        if not isinstance(i, str) or not i or len(i.encode()) > f.id_max_length:
            raise InvalidInputError(
                f"id {i!r}: ids must be non-empty strings of at most id_max_length={f.id_max_length} bytes"
            )
        if not isinstance(text, str) or len(text.encode()) > f.text_max_length:
            size = len(text.encode()) if isinstance(text, str) else type(text).__name__
            raise InvalidInputError(
                f"document {i!r}: text of {size} bytes exceeds text_max_length={f.text_max_length}; "
                "raise text_max_length (at most 65535) or split the document"
            )
        if not isinstance(meta, dict):
            raise InvalidInputError(f"document {i!r}: metadata must be a dict, got {type(meta).__name__}")
