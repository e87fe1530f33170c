"""The index contract (tests/index_contract.py) on every vector index backend: FAISS Flat, IVF and
HNSW, Milvus Lite, and the Milvus 2.3.5 server (under its marker). Each is a short subclass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from index_contract import IndexContract
from retriever.testing.projects import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BACKENDS = yaml.safe_load((ROOT / "parameter.yaml").read_text())["index_backend_configs"]


def faiss(**section: Any) -> dict[str, Any]:
    return {"index_backend_configs": {**BACKENDS, "faiss": {**BACKENDS["faiss"], "index_path": "out/faiss", **section}}}


class TestFaissFlat(IndexContract):
    overrides = faiss()


class TestFaissIVF(IndexContract):
    overrides = faiss(index_factory="IVF4,Flat", nprobe=4)  # every list probed: exact
    ann = ("nprobe",)


class TestFaissHNSW(IndexContract):
    overrides = faiss(index_factory="HNSW16", ef_search=64)
    exact = False
    ann = ("efSearch",)


class MilvusContract(IndexContract):
    """Vectors in Milvus, the documents in the local corpus and change log."""

    snapshots = "shared"

    def uri(self, tmp_path: Path, request: pytest.FixtureRequest) -> str:
        raise NotImplementedError

    def project_overrides(self, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
        milvus = {**BACKENDS["milvus"], "uri": self.uri(tmp_path, request), "read_consistency": "Strong"}
        return {"index_backend": "milvus", "collection_name": f"contract_{tmp_path.name[-12:].replace('-', '_')}",
                "index_backend_configs": {**BACKENDS, "milvus": milvus}}


class TestMilvusLite(MilvusContract):
    def uri(self, tmp_path: Path, request: pytest.FixtureRequest) -> str:
        return str(tmp_path / "milvus.db")


@pytest.mark.milvus_server
class TestMilvusServer(MilvusContract):
    def uri(self, tmp_path: Path, request: pytest.FixtureRequest) -> str:
        return request.getfixturevalue("milvus_server_uri")
