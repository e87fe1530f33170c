"""The client of a deployed retriever (`retriever deploy`, or UltraRAG's own deploy script):
`POST <retriever_url>/search` with UltraRAG's request shape plus ours, retried on connection
errors, 429 and 5xx with backoff (the server's Retry-After first). The bearer token comes from
the YAML's `remote.token` or the environment (`remote.token_env`), is sent only to the YAML's
`retriever_url`, and never appears in a log or an error."""

from __future__ import annotations

import logging
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..config import Config
from ..errors import ConfigError, ForbiddenError, RemoteError
from ..retry import RetryPolicy
from ..security.guard import FROM_CLIENT
from ..security.redaction import detail

log = logging.getLogger(__name__)
RETRIED = (429, 500, 502, 503, 504)


def search_url(retriever_url: str) -> str:
    """UltraRAG's rule: no scheme -> http://; the path becomes /search."""
    url = retriever_url.strip()
    if not url.startswith(("http://", "https://")):
        url = f"http://{url}"
    parts = urlsplit(url)
    if not parts.hostname:
        raise ConfigError(f"retriever_url {retriever_url!r} names no host")
    return urlunsplit(parts._replace(path="/search", query="", fragment=""))


def target(cfg: Config, given: str | None) -> str:
    """The service to call: the YAML's `retriever_url`, or one a call names where the operator
    allows it (security.client_endpoints) or where it is the YAML's own."""
    if given and given != cfg.retriever_url and FROM_CLIENT.get() and not cfg.security.client_endpoints:
        raise ForbiddenError("retriever_deploy_search: retriever_url comes from parameter.yaml, not from a tool call "
                             "(the operator can set security.client_endpoints: true)")
    url = given or cfg.retriever_url
    if not url:
        raise ConfigError("retriever_deploy_search: no retriever_url; set retriever_url in parameter.yaml")
    return search_url(url)


def token(cfg: Config, url: str | None = None) -> str | None:
    """The operator's token (YAML or environment), for the operator's `retriever_url` only: a URL
    a call names (security.client_endpoints) is sent no token."""
    if url is not None and (not cfg.retriever_url or search_url(cfg.retriever_url) != url):
        return None
    return cfg.remote.token or os.environ.get(cfg.remote.token_env) or None


def deploy_search(cfg: Config, url: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The service's reply to `payload` (`cfg`: the operator's); a RemoteError naming the URL and
    status if it still fails after `remote.max_retries` retries."""
    secret = token(cfg, url)
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    policy = RetryPolicy(cfg.remote.max_retries, base_delay=0.5, max_delay=10.0)
    with httpx.Client(timeout=cfg.remote.timeout, headers=headers) as client:
        retry = 0
        while True:
            try:
                response = client.post(url, json=payload)
                failure, wait_hint = _failure(response, secret), response.headers.get("retry-after")
                retried = response.status_code in RETRIED
            except httpx.TransportError as e:
                failure, wait_hint, retried = f"cannot reach it ({type(e).__name__}: {detail(str(e), [secret])})", \
                    None, True
            if failure is None:
                return _checked(url, response)
            if not retried or retry == cfg.remote.max_retries:
                tries = f" (after {retry} retries)" if retry else ""
                raise RemoteError(f"retriever_deploy_search: {url}: {failure}{tries}")
            wait = policy.after(retry, wait_hint)
            retry += 1
            log.warning("retriever_deploy_search: %s: %s; retry %d/%d in %.2f s", url, failure, retry,
                        cfg.remote.max_retries, wait)
            time.sleep(wait)


def _failure(response: httpx.Response, secret: str | None) -> str | None:
    if response.status_code == 200:
        return None
    return f"answered {response.status_code}: {detail(response.text, [secret])}"


def _checked(url: str, response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not ({"ret_psg", "ret_ids"} & body.keys()):
        raise RemoteError(f"retriever_deploy_search: {url} answered 200 without ret_psg or ret_ids: "
                          f"{detail(response.text, [])}")
    return body
