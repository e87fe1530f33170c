"""A chat-completions client that asks for JSON and says plainly why an answer is unusable.

One request per prompt through the `openai` library, retried by the house's policy (retry.py:
connection errors, timeouts, 408, 409, 429 and 5xx, `llm.max_retries`; the openai client's own
retries are off), up to `llm.concurrency` at once. An answer is a JSON
object or an `LLMError` naming the server, the model and what went wrong; the key never appears.

MCP sampling (asking the calling client's model) is not offered: fastmcp 4.1.2 removed it from the
server's Context, its server says "Server-initiated sampling is deprecated in MCP (SEP-2577) and the
2026-07-28 protocol has no back-channel for it (SEP-2322). Call an LLM directly from your tool."
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..config.serving import LLMConfig
from ..errors import CancelledWork, ConfigError, LLMError, MissingDependencyError
from ..retry import Retryable, RetryPolicy, retried_status
from ..security.limits import CANCEL, Budget
from ..security.redaction import detail, redact

KEY_ENV = "RETRIEVER_LLM_API_KEY"
NO_KEY = "EMPTY"  # what local servers without authentication are sent
SYSTEM = "You are a retrieval assistant. Answer with one JSON object only, no prose."


class ChatClient:
    """One call's client: at most `max_requests` requests (limits.max_llm_requests), none sent once
    the call is cancelled (limits.CANCEL, taken when the client is made)."""

    def __init__(self, cfg: LLMConfig, max_requests: int | None = None) -> None:
        if not cfg.base_url or not cfg.model:
            raise ConfigError("the LLM tools need an OpenAI-compatible chat-completions server: set llm.base_url and "
                              "llm.model in parameter.yaml (key: llm.api_key or $RETRIEVER_LLM_API_KEY)")
        try:
            import openai
        except ImportError as e:
            raise MissingDependencyError("openai", "mcp-retriever[openai]") from e
        self.cfg = cfg
        self.budget = None if max_requests is None else Budget("LLM requests", "max_llm_requests", max_requests)
        self.cancel = CANCEL.get()
        configured = cfg.api_key.get_secret_value() if cfg.api_key is not None else ""
        from_env = "" if cfg.url_from_call else os.environ.get(KEY_ENV, "")  # a call's URL: its key only (guard.py)
        self._key = configured.strip() or from_env.strip() or NO_KEY
        self._openai = openai
        self._client = openai.OpenAI(base_url=cfg.base_url.rstrip("/"), api_key=self._key, timeout=cfg.timeout,
                                     max_retries=0)
        self._policy = RetryPolicy(cfg.max_retries, base_delay=0.5, max_delay=8.0)  # the openai client's

    def ask(self, prompt: str) -> Any:
        """The model's answer to `prompt`, parsed from JSON."""
        if self.cancel is not None and self.cancel.is_set():
            raise CancelledWork("cancelled by the caller; no further LLM request sent")
        if self.budget is not None:
            self.budget.take()
        try:
            reply = self._policy.retrying()(self._create, prompt)
        except Retryable as e:  # still failing after every retry
            raise self._error(str(e), True) from None
        if not reply.choices:
            raise self._error("answered with no choices")
        message = reply.choices[0].message
        if getattr(message, "refusal", None):
            raise self._error(f"refused: {detail(message.refusal, [self._secret])}")
        text = (message.content or "").strip()
        if text.startswith("```"):  # a fenced block despite JSON mode
            text = text.strip("`").removeprefix("json").strip()
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise self._error(f"answered malformed JSON: {detail(text, [self._secret], 200) or '(empty)'}") from None

    def _create(self, prompt: str) -> Any:
        """One request: the reply; Retryable for a failure a retry may fix, else LLMError."""
        o, c = self._openai, self.cfg
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if c.json_mode else {}
        try:
            return self._client.chat.completions.create(
                model=c.model, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                temperature=c.temperature, max_tokens=c.max_tokens, **extra)
        except o.APIStatusError as e:
            what = f"answered HTTP {e.status_code}: {self._detail(e.response)}"
            if not retried_status(e.status_code):
                raise self._error(what) from None
            raise Retryable(what, e.response.headers.get("retry-after")) from None
        except o.APITimeoutError:
            raise Retryable(f"did not answer within {c.timeout:g} s") from None
        except o.APIConnectionError as e:
            raise Retryable(f"could not be reached ({type(e.__cause__ or e).__name__})") from None

    def ask_all(self, prompts: Sequence[str]) -> list[Any | LLMError]:
        """Every prompt's answer, or its error, in order; `llm.concurrency` requests at a time."""
        def one(prompt: str) -> Any:
            try:
                return self.ask(prompt)
            except LLMError as e:
                return e

        if len(prompts) <= 1 or self.cfg.concurrency == 1:
            return [one(p) for p in prompts]
        with ThreadPoolExecutor(min(self.cfg.concurrency, len(prompts)), thread_name_prefix="retriever-llm") as pool:
            return list(pool.map(one, prompts))

    @property
    def _secret(self) -> str | None:
        return self._key if self._key != NO_KEY else None

    def _detail(self, response: Any) -> str:
        try:
            text = response.text
        except Exception:  # noqa: BLE001 - a body that cannot be read is no reason to hide the status
            text = ""
        return detail(text, [self._secret]) or "(empty body)"

    def _error(self, what: str, retried: bool = False) -> LLMError:
        tries = f" (after {self.cfg.max_retries} retries)" if retried and self.cfg.max_retries else ""
        message = f"LLM {self.cfg.base_url} (model {self.cfg.model!r}) {what}{tries}"
        return LLMError(redact(message, [self._secret]))
