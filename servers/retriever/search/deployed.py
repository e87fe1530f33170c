"""The client of a deployed retriever (`retriever deploy`, or UltraRAG's own deploy script):
`POST <retriever_url>/search` with UltraRAG's request shape plus ours, retried by the house's
policy (retry.py: connection errors, 408, 409, 429 and 5xx, the server's Retry-After first). The
bearer token comes from the YAML's `remote.token` or the environment (`remote.token_env`), is
sent only to the YAML's `retriever_url`, and never appears in a log or an error."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..config import Config
from ..errors import ConfigError, ForbiddenError, RemoteError
from ..retry import Retryable, RetryPolicy, retried_status
from ..security.guard import FROM_CLIENT
from ..security.redaction import detail

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


def service_parts(url: str, name: str, error: type[Exception] = ConfigError) -> SplitResult:
    """A service's URL read by UltraRAG's rule (no scheme -> http://), refused with `error` where it
    names no host (`name`: what the message calls it)."""
    given = url.strip()
    if not given.startswith(("http://", "https://")):
        given = f"http://{given}"
    parts = urlsplit(given)
    if not parts.hostname:
        raise error(f"{name} {url!r} names no host")
    return parts


def search_url(retriever_url: str) -> str:
    """UltraRAG's rule: no scheme -> http://; the path becomes /search."""
    return urlunsplit(service_parts(retriever_url, "retriever_url")._replace(path="/search", query="", fragment=""))


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
    import httpx  # here, not at import: a server that never calls a deployed service skips it (~60 ms at start)

    secret = token(cfg, url)
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    policy = RetryPolicy(cfg.remote.max_retries, base_delay=0.5, max_delay=10.0)

    def note(retry: int, wait: float, e: Retryable) -> None:
        log.warning("retriever_deploy_search: %s: %s; retry %d/%d in %.2f s", url, e, retry, policy.max_retries, wait)

    retrying = policy.retrying(note)
    with httpx.Client(timeout=cfg.remote.timeout, headers=headers) as client:
        try:
            return _checked(url, retrying(_post, client, url, payload, secret))
        except (Retryable, _Refused) as e:
            retries = retrying.statistics["attempt_number"] - 1
            tries = f" (after {retries} retries)" if retries else ""
            raise RemoteError(f"retriever_deploy_search: {url}: {e}{tries}") from None


class _Refused(Exception):
    """A status a retry would not change (400, 401, 404...)."""


def _post(client: httpx.Client, url: str, payload: dict[str, Any], secret: str | None) -> httpx.Response:
    """One request: the 200 reply; else Retryable (a connection error, a retried status) or _Refused."""
    import httpx

    try:
        response = client.post(url, json=payload)
    except httpx.TransportError as e:
        raise Retryable(f"cannot reach it ({type(e).__name__}: {detail(str(e), [secret])})") from None
    if response.status_code == 200:
        return response
    failure = f"answered {response.status_code}: {detail(response.text, [secret])}"
    if retried_status(response.status_code):
        raise Retryable(failure, response.headers.get("retry-after"))
    raise _Refused(failure)


def _checked(url: str, response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not ({"ret_psg", "ret_ids"} & body.keys()):
        raise RemoteError(f"retriever_deploy_search: {url} answered 200 without ret_psg or ret_ids: "
                          f"{detail(response.text, [])}")
    return body
