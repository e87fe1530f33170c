"""parameter.yaml's `sources`: folders of a user's files that `retriever sync` (and `watch`, and
the `sync_sources` tool) keep a collection in step with (sources/, engine/sync.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from .base import ResolvedPath, Section
from .serving import ChunkingConfig

DEFAULT_EXCLUDE = [".*", "__pycache__", "node_modules", "*~", "*.swp", "*.tmp"]


def _name(value: str) -> str:
    if ":" in value or value.startswith("/") or value.endswith("/") or "\\" in value:
        raise ValueError(f"a source's name is a plain prefix of its documents' ids (no ':', '\\\\', leading or "
                         f"trailing '/'), got {value!r}")
    return value


class SourceConfig(Section):
    """One folder. A file's id is its path relative to `path` (with `name/` before it when the
    source is named), so same-named files in two folders never collide; its chunks are
    `<id>:<n>`. `include` / `exclude` are shell patterns (fnmatch) on that relative path; a
    pattern without '/' also matches the file's name or any folder's name on the way."""

    path: Annotated[ResolvedPath, BeforeValidator(lambda v: Path(v).expanduser() if isinstance(v, str | Path) else v)]
    name: Annotated[str, AfterValidator(_name)] = ""  # id prefix; sources sharing a collection need distinct names
    collection: str = ""  # the collection it fills ("" = the YAML's collection_name)
    include: list[str] = ["*"]
    exclude: list[str] = DEFAULT_EXCLUDE
    # cut per page / section into whole words of at most 128 of the model's tokens, heading line
    # included (MiniLM reads 256): on SciFact it beat 150 words and 250 tokens in dense and hybrid
    # search (bench/RESULTS.md, section chunk-units)
    chunking: ChunkingConfig = ChunkingConfig(by="token", length=128, overlap=16)
    # each chunk's indexed text starts with its document's title and heading path (bench/RESULTS.md, context)
    context: bool = True
    follow_symlinks: bool = False  # a link out of the folder is not followed unless this is true
    max_files: int = Field(100_000, ge=1)  # a walk that finds more stops with an error (a wrong root, say)
    commit_chunks: int = Field(4096, ge=1)  # chunks per commit, or 30 s of work (a kill loses at most the batch in hand)

    @model_validator(mode="after")
    def _flat_chunks(self) -> SourceConfig:
        if self.chunking.levels:
            raise ValueError("sources[].chunking: levels (a hierarchy) are not kept in sync; use by, length, overlap")
        return self


def check_sources(sources: list[SourceConfig], selected: str) -> list[SourceConfig]:
    """Sources sharing a collection must have distinct names (else their ids could collide)."""
    seen: dict[tuple[str, str], SourceConfig] = {}
    for s in sources:
        key = (s.collection or selected, s.name)
        if key in seen:
            raise ValueError(f"sources: {seen[key].path} and {s.path} both fill collection {key[0]!r} with name "
                             f"{s.name!r}; give each a distinct `name` (their files' ids start with it)")
        seen[key] = s
    return sources
