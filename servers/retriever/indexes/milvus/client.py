"""Connecting to Milvus: Milvus Lite (a local path ending in .db, one process per database) or a
Milvus server (http://host:port), with errors that say what went wrong and never show a secret."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...config.milvus import NAME_PATTERN
from ...errors import InvalidInputError, MissingDependencyError, RetrieverError


class MilvusError(RetrieverError):
    """A Milvus call failed; the message names the operation, collection and server."""


class MilvusLiteLockedError(MilvusError):
    """Another process has the Milvus Lite database folder open."""


class MilvusVersionError(MilvusError):
    """The Milvus server is too old for a feature this store needs."""


def validate_collection_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInputError(
            f"invalid collection name {name!r}: use 1 to 255 characters from letters, digits and _"
        )
    return name


def load_pymilvus():
    try:
        import pymilvus
    except ImportError as e:
        raise MissingDependencyError("pymilvus", "mcp-retriever[milvus]") from e
    return pymilvus


def is_lite(uri: str) -> bool:
    return not re.match(r"^[a-z]+://", uri)


def display(uri: str) -> str:
    """The uri without user:password@, for messages."""
    if is_lite(uri):
        return uri
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def _lite_locked(path: str) -> bool:
    """True when another process holds Milvus Lite's lock on the database folder."""
    lock = Path(path) / "LOCK"
    if not lock.exists():
        return False
    import fcntl

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def connect(uri: str, token: str | None) -> Any:
    """A MilvusClient for `uri`; a Lite folder held by another process is a clear error."""
    pymilvus = load_pymilvus()
    if is_lite(uri):
        if not uri.endswith(".db"):
            raise InvalidInputError(
                f"milvus uri {uri!r}: use a local path ending in .db (Milvus Lite) or http://host:port (a server)"
            )
        uri = os.path.abspath(uri)
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    try:
        client = pymilvus.MilvusClient(uri=uri, token=token or "")
    except Exception as e:
        if is_lite(uri) and _lite_locked(uri):
            raise MilvusLiteLockedError(
                f"the Milvus Lite database {uri} is open in another process; Milvus Lite allows one "
                "process per database: stop the other process, use another uri, or run a Milvus server"
            ) from e
        raise MilvusError(f"cannot connect to Milvus at {display(uri)}: {e}") from e
    if not is_lite(uri):  # Lite has every feature used here (and 2.x Lite lacks GetVersion)
        _check_version(client, uri)
    return client


def _check_version(client: Any, uri: str) -> None:
    version = str(client.get_server_version())
    found = re.match(r"v(\d+)\.(\d+)", version)  # a server says v2.3.5; Lite says milvus_lite-3.2.2
    if found and (int(found[1]), int(found[2])) < (2, 3):
        raise MilvusVersionError(
            f"the Milvus server at {display(uri)} is {version}: upsert and count(*) need Milvus 2.3 or newer"
        )


def list_collections(uri: str, token: str | None = None) -> list[str]:
    client = connect(uri, token)
    try:
        return sorted(client.list_collections())
    finally:
        client.close()
