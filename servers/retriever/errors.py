"""One root error; each subclass names what went wrong and how to fix it."""

from __future__ import annotations


class RetrieverError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigError(RetrieverError):
    """parameter.yaml or a tool argument has a wrong key, type or value."""


class CorpusError(RetrieverError):
    """The corpus file cannot be read: bad JSON, no text field, duplicate id, empty."""


class NotInitializedError(RetrieverError):
    """A tool was called before `retriever_init`."""

    def __init__(self, tool: str) -> None:
        super().__init__(f"{tool}: the retriever is not initialised; call retriever_init first")


class IndexMissingError(RetrieverError):
    """A search ran before its index was built or loaded."""


class IndexMismatchError(RetrieverError):
    """A saved index or embedding file does not belong to this corpus or model."""


class AlreadyExistsError(RetrieverError):
    """An output exists and `overwrite` is false."""


class MissingDependencyError(RetrieverError):
    """A library a backend needs is not installed; `package` is what to pip install."""

    def __init__(self, module: str, package: str, command: str | None = None) -> None:
        super().__init__(f"the module {module!r} is not installed; run: {command or f'pip install {package!r}'}")


class NotYetSupportedError(RetrieverError):
    """A documented option whose backend is not active in this release."""


class InvalidInputError(RetrieverError):
    """A tool argument is out of range or of the wrong shape."""


class EmbeddingServerError(RetrieverError):
    """An embedding server failed or answered wrongly (after retries); names the server and status."""


class ForbiddenError(RetrieverError):
    """A client asked for what the operator did not allow: a path outside the allowed roots, an
    endpoint or key from a tool call, a setting only parameter.yaml may change."""


class LimitError(RetrieverError):
    """A call asks for more work than `limits` in parameter.yaml allows."""


class BusyError(RetrieverError):
    """Another process is writing to the same collection."""


class CancelledWork(RetrieverError):
    """The caller cancelled the request (or went away); the rest of its work was dropped."""


class RemoteError(RetrieverError):
    """A deployed retriever failed or answered wrongly (after retries); names the URL and status."""


class LLMError(RetrieverError):
    """The LLM did not give a usable answer (unreachable, timed out, an HTTP error, malformed JSON, a
    refusal). Callers keep the plain retrieval result and report this as a warning."""
