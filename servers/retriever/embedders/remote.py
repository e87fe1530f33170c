"""Embeddings from a server with an OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM,
Ollama, Infinity), through the `openai` client library.

Texts go in batches of `batch_size`, up to `concurrency` requests at once. Connection errors,
timeouts, 408, 409, 429 and 5xx are retried by the house's policy (retry.py: `max_retries`,
backoff with jitter, the server's Retry-After first; the openai client's own retries are off);
a request that still fails fails the whole call with an error naming the server and the status.
Every answer is checked: one vector per text, in order, each of the dimension the first
request (the probe at start-up) returned. The API key is never logged or put in an error.

Image corpora (`is_multimodal`, Infinity only: its `/embeddings` takes `modality: image`) send each
image as a data URI; a probe image at start-up shows the served model embeds images.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import EmbeddingServerError, MissingDependencyError, NotYetSupportedError
from ..retry import Retryable, RetryPolicy, retried_status
from ..security.redaction import detail, redact
from .base import model_id_for, with_instruction

log = logging.getLogger(__name__)
KEY_ENV = ("RETRIEVER_API_KEY", "OPENAI_API_KEY")
NO_KEY = "EMPTY"  # what servers without authentication (vLLM, Infinity, Ollama) are sent


@dataclass(frozen=True)
class ServerSettings:
    base_url: str
    model: str
    api_key: str = field(repr=False)
    concurrency: int
    timeout: float
    max_retries: int
    batch_size: int
    normalize: bool


def resolve_key(configured: str, environment: bool = True) -> str:
    """The configured key, else $RETRIEVER_API_KEY, else $OPENAI_API_KEY, else a placeholder. No
    key from the environment for a URL a tool call gave (`environment` false; guard.py)."""
    for value in (configured, *(os.environ.get(name, "") for name in KEY_ENV if environment)):
        if value.strip():
            return value.strip()
    return NO_KEY


def openai_settings(cfg: Config) -> ServerSettings:
    o = cfg.backend_configs.openai
    return _settings(cfg, o, o.base_url, o.model_name)


def infinity_settings(cfg: Config) -> ServerSettings:
    inf = cfg.backend_configs.infinity
    if not inf.url:
        raise NotYetSupportedError(
            "backend 'infinity' talks to an Infinity server: start one (`infinity_emb v2 --model-id MODEL "
            "--port 7997`) and set backend_configs.infinity.url (e.g. http://127.0.0.1:7997); the in-process "
            "engine is not run by this release"
        )
    return _settings(cfg, inf, inf.url, inf.model_name or model_id_for(cfg.model_name_or_path))


def _settings(cfg: Config, section: Any, base_url: str, model: str) -> ServerSettings:
    key = section.api_key.get_secret_value() if section.api_key is not None else ""
    return ServerSettings(
        base_url=base_url.rstrip("/"), model=model, api_key=resolve_key(key, not section.url_from_call),
        concurrency=section.concurrency, timeout=section.timeout, max_retries=section.max_retries,
        batch_size=section.batch_size or cfg.batch_size,
        normalize=cfg.backend_configs.sentence_transformers.sentence_transformers_encode.normalize_embeddings,
    )


class ServerEmbedder:
    """An `Embedder` over an OpenAI-compatible /embeddings endpoint."""

    def __init__(self, settings: ServerSettings, cfg: Config) -> None:
        try:
            import openai
        except ImportError as e:
            raise MissingDependencyError("openai", "mcp-retriever[openai]") from e
        self._s = settings
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=settings.base_url, api_key=settings.api_key, timeout=settings.timeout, max_retries=0,
        )
        self._policy = RetryPolicy(settings.max_retries, base_delay=0.5, max_delay=8.0)  # the openai client's
        self.model_id = model_id_for(settings.model)
        self.runtime = f"{cfg.backend} server"
        self.runtime_reason = f"backend: {cfg.backend}"
        self.warnings: list[str] = []
        enc = cfg.backend_configs.sentence_transformers.sentence_transformers_encode
        names = {k: v for k, v in (("q_prompt_name", enc.q_prompt_name), ("psg_prompt_name", enc.psg_prompt_name))
                 if v}
        if names:
            self.warnings.append(
                f"prompt names {names} cannot be applied by an embedding server ({settings.base_url}); "
                "texts are sent as they are (set query_instruction to prefix queries)"
            )
            log.warning(self.warnings[-1])
        self.dimension = 0  # unknown until the probe
        self.dimension = int(self._request(["dimension probe"]).shape[1])
        log.info("embedding server %s serves %s with dimension %d", settings.base_url, settings.model, self.dimension)

    def encode_queries(self, texts: Sequence[str], instruction: str) -> np.ndarray:
        return self._encode(with_instruction(texts, instruction))

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    def _encode(self, texts: list[str], modality: str = "text") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        size = self._s.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        if len(batches) == 1 or self._s.concurrency == 1:
            parts = [self._request(b, modality) for b in batches]
        else:
            pool = ThreadPoolExecutor(min(self._s.concurrency, len(batches)), thread_name_prefix="retriever-http")
            try:
                parts = list(pool.map(lambda b: self._request(b, modality), batches))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)  # after a failure, send nothing more
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def _request(self, texts: list[str], modality: str = "text") -> np.ndarray:
        try:
            reply = self._policy.retrying(self._note)(self._create, texts, modality)
        except Retryable as e:  # still failing after every retry
            raise self._error(str(e)) from None
        return self._check(texts, reply.data)

    def _create(self, texts: list[str], modality: str) -> Any:
        """One request: the reply; Retryable for a failure a retry may fix, else EmbeddingServerError."""
        o = self._openai
        extra = {"modality": modality} if modality != "text" else None
        try:
            return self._client.embeddings.create(model=self._s.model, input=texts, encoding_format="float",
                                                  extra_body=extra)
        except o.APIStatusError as e:
            what = f"answered HTTP {e.status_code}: {_body(e.response, self._s.api_key)}"
            if not retried_status(e.status_code):
                raise self._error(what, retried=False) from None
            raise Retryable(what, e.response.headers.get("retry-after")) from None
        except o.APITimeoutError:
            raise Retryable(f"did not answer within {self._s.timeout:g} s") from None
        except o.APIConnectionError as e:
            raise Retryable(f"could not be reached ({type(e.__cause__ or e).__name__})") from None

    def _note(self, retry: int, wait: float, e: Retryable) -> None:
        log.warning("embedding server %s: %s; retry %d/%d in %.2f s", self._s.base_url, e, retry,
                    self._s.max_retries, wait)

    def _check(self, texts: list[str], data: list[Any]) -> np.ndarray:
        if len(data) != len(texts):
            raise self._error(f"returned {len(data)} vectors for {len(texts)} texts", retried=False)
        rows = sorted(data, key=lambda d: d.index)
        if [d.index for d in rows] != list(range(len(texts))):
            raise self._error("returned vectors with missing or repeated indexes", retried=False)
        dims = {len(d.embedding) for d in rows}
        if len(dims) != 1 or (self.dimension and dims != {self.dimension}):
            want = f"{self.dimension}" if self.dimension else "one dimension"
            raise self._error(f"returned vectors of dimension {sorted(dims)}, expected {want}", retried=False)
        out = np.asarray([d.embedding for d in rows], dtype=np.float32)
        if not np.isfinite(out).all():
            raise self._error("returned vectors with NaN or infinite values", retried=False)
        if self._s.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = (out / np.where(norms == 0, 1, norms)).astype(np.float32)
        return out

    def _error(self, what: str, retried: bool = True) -> EmbeddingServerError:
        tries = f" (after {self._s.max_retries} retries)" if retried and self._s.max_retries else ""
        message = f"embedding server {self._s.base_url} (model {self._s.model!r}) {what}{tries}"
        return EmbeddingServerError(redact(message, [self._s.api_key if self._s.api_key != NO_KEY else None]))


class ImageServerEmbedder(ServerEmbedder):
    """Passages are image files, sent to an Infinity server as data URIs with `modality: image`."""

    def __init__(self, settings: ServerSettings, cfg: Config) -> None:
        super().__init__(settings, cfg)
        try:
            self._encode([PROBE_IMAGE], "image")
        except EmbeddingServerError as e:
            raise EmbeddingServerError(f"is_multimodal: {e}; serve an image-text model (a CLIP model) there") from None

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([data_uri(p) for p in texts], "image")


PROBE_IMAGE = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAADElEQVR4nGNgGB4AAADIAA"
               "GtQHYiAAAAAElFTkSuQmCC")  # an 8x8 black PNG


def data_uri(path: str) -> str:
    """The image file as a data URI (its own format; PIL names it, and says if it is no image)."""
    import base64

    from .images import load_image

    with load_image(path, convert=False) as im:
        fmt = (im.format or "png").lower()
    return f"data:image/{fmt};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"


def _body(response: Any, secret: str) -> str:
    """The error body, the key replaced before it is cut (see redaction.py)."""
    try:
        text = response.text.strip()
    except Exception:  # noqa: BLE001 - a body that cannot be read is no reason to hide the status
        text = ""
    return detail(text, [secret if secret != NO_KEY else None]) or "(empty body)"
