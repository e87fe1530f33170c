"""OAuth 2.1 resource server (issue 47; security.http.oauth): a bearer JWT access token of the one
issuer the YAML names becomes a principal. Verified with PyJWT against the issuer's published keys
(its discovery document's jwks_uri, or oauth.jwks_uri), which are cached for oauth.jwks_ttl and
fetched again for an unknown `kid` at most once per oauth.jwks_refetch seconds, so the issuer's key
rotation is picked up without letting unknown kids hammer it. Each request to the issuer takes at most
oauth.timeout in all; when the keys cannot be fetched, those already held serve on (none: 503).
Checked: the signature (only the asymmetric algorithms the YAML allows, with a key of the matching type:
never `none`, never HS*), `iss`, `aud` (oauth.resource), `exp`, `nbf`, `iat`. The scopes come from `scope`
(read, write, admin; others ignored), the groups from oauth.groups_claim, the name from oauth.name_claim.

Also the protected resource metadata (RFC 9728) and the `WWW-Authenticate` challenges (RFC 6750) that
point a client at it. No message here quotes a token or any part of one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..config.access import SCOPES, OAuthConfig
from ..errors import MissingDependencyError, RetrieverError
from .principals import Principal

log = logging.getLogger(__name__)
METADATA_PATH = "/.well-known/oauth-protected-resource"
MAX_DOCUMENT_BYTES = 1 << 20  # a discovery document or a key set larger than this is refused
RETRY_DOWN = 1.0  # seconds between tries while the issuer has never answered (requests meanwhile: 503)
KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}  # an algorithm's prefix -> the key type it needs


class InvalidToken(RetrieverError):
    """The token does not verify; the message (for the client and the log) says why, never what it holds."""


class IssuerUnavailable(RetrieverError):
    """The issuer's keys cannot be fetched now (a 503 for the client; the log has the reason)."""


def metadata_url(resource: str) -> str:
    """Where RFC 9728 puts the metadata of `resource`: the well-known path before the resource's path."""
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, METADATA_PATH + parts.path.rstrip("/"), "", ""))


def metadata_paths(cfg: OAuthConfig) -> set[str]:
    """The paths the metadata is served at: the well-known one, and it followed by the resource's path."""
    return {METADATA_PATH, urlsplit(metadata_url(cfg.resource)).path}


def metadata(cfg: OAuthConfig) -> dict[str, Any]:
    """The protected resource metadata document (RFC 9728, section 2)."""
    return {"resource": cfg.resource, "authorization_servers": [cfg.issuer], "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"], "resource_name": "retriever"}


def challenge(cfg: OAuthConfig | None, error: str | None = None, description: str | None = None,
              scope: str | None = None) -> str:
    """A `WWW-Authenticate` value: Bearer, the resource metadata's URL (OAuth mode), and the error."""
    params = ['realm="retriever"']
    if cfg is not None:
        params.append(f'resource_metadata="{metadata_url(cfg.resource)}"')
    if error:
        params.append(f'error="{error}"')
    if description:
        params.append(f'error_description="{_quotable(description)}"')
    if scope:
        params.append(f'scope="{scope}"')
    return "Bearer " + ", ".join(params)


def insufficient_scope(cfg: OAuthConfig | None, scope: str) -> str:
    """The `WWW-Authenticate` of a 403 for a caller without `scope` (RFC 6750's insufficient_scope, the
    scope named; the resource metadata's URL in OAuth mode): the deploy service's routes and MCP over HTTP
    (mcp/middleware.py ScopeChallenge) send this one."""
    return challenge(cfg, "insufficient_scope", None, scope)


def _quotable(text: str) -> str:
    return "".join(c for c in text if c not in '"\\' and 0x20 <= ord(c) < 0x7f)


class Verifier:
    """The issuer's keys, kept; `principal(token)` verifies one token."""

    def __init__(self, cfg: OAuthConfig) -> None:
        try:
            import jwt  # noqa: F401  (PyJWT: checked at start, not at the first request)
        except ImportError as e:
            raise MissingDependencyError("jwt", "pyjwt[crypto]", "pip install 'mcp-retriever[oauth]'") from e
        self.cfg = cfg
        self.keys: dict[str | None, dict[str, Any]] = {}
        self.fetched_at = float("-inf")  # when the keys were last fetched (monotonic)
        self.fetches = 0
        self._tried = float("-inf")  # the last attempt to fetch them
        self._lock = asyncio.Lock()
        self._jwks_uri = cfg.jwks_uri

    async def principal(self, token: str) -> Principal:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a signed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.cfg.algorithms:
            raise InvalidToken(f"the token's algorithm is not accepted here (accepted: {', '.join(self.cfg.algorithms)})")
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        claims = self._verified(token, alg, key)
        return self._principal(claims)

    def _verified(self, token: str, alg: str, jwk: dict[str, Any]) -> dict[str, Any]:
        import jwt

        if jwk.get("kty") != KEY_TYPES.get(alg[:2]) or jwk.get("alg", alg) != alg:
            raise InvalidToken("the token's algorithm does not fit the issuer's key it names")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            return jwt.decode(token, key, algorithms=[alg], audience=self.cfg.resource, issuer=self.cfg.issuer,
                              leeway=self.cfg.leeway, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token is not for this resource (aud)") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token is not from this server's issuer (iss)") from None
        except jwt.MissingRequiredClaimError as e:
            raise InvalidToken(f"the token lacks the {e.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except (jwt.PyJWTError, ValueError, TypeError):
            raise InvalidToken("the token does not verify") from None

    def _principal(self, claims: dict[str, Any]) -> Principal:
        c = self.cfg
        name = claims.get(c.name_claim) or claims.get("client_id")
        if not isinstance(name, str) or not name:
            raise InvalidToken(f"the token names no caller ({c.name_claim} or client_id)")
        scope = claims.get("scope", claims.get("scp", ""))
        granted = scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
        groups = claims.get(c.groups_claim, [])
        groups = [groups] if isinstance(groups, str) else [g for g in groups if isinstance(g, str)] \
            if isinstance(groups, list) else []
        read, write = list(c.read), list(c.write)
        for g in groups:
            if g in c.groups:
                read += c.groups[g].read
                write += c.groups[g].write
        return Principal(name[:200], frozenset(s for s in granted if s in SCOPES), tuple(dict.fromkeys(read)),
                         tuple(dict.fromkeys(write)), tuple(groups), source="oauth")

    async def _key(self, kid: str | None) -> dict[str, Any]:
        """The issuer's key `kid` (the only key, where the token names none): from the cache, or the
        keys fetched again (expired cache, or an unknown kid past the refetch interval)."""
        now = time.monotonic()
        if now - self.fetched_at > self.cfg.jwks_ttl:
            await self._refresh(self.fetched_at)
        found = self._find(kid)
        if found is None and time.monotonic() - self.fetched_at >= self.cfg.jwks_refetch:
            await self._refresh(self.fetched_at)
            found = self._find(kid)
        if found is None:
            raise InvalidToken("the token names a key the issuer does not publish")
        return found

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        return self.keys.get(kid)

    async def _refresh(self, seen: float) -> None:
        """Fetch the keys, once for all the requests that found them stale at `seen`."""
        async with self._lock:
            if self.fetched_at != seen:
                return  # another request fetched them meanwhile
            if not self.keys and time.monotonic() - self._tried < RETRY_DOWN:
                raise IssuerUnavailable("the token issuer's keys cannot be fetched now; try again shortly")
            self._tried = time.monotonic()
            try:
                keys = await self._fetch()
            except (OSError, ValueError, RetrieverError) as e:
                log.warning("the issuer's keys cannot be fetched: %s", e)
                if not self.keys:
                    raise IssuerUnavailable("the token issuer's keys cannot be fetched now; try again shortly") from None
                self.fetched_at = time.monotonic()  # the old keys serve on; no new try before jwks_refetch
                return
            self.keys, self.fetched_at = keys, time.monotonic()
            self.fetches += 1
            log.info("the issuer's keys fetched: %d signing key(s)", len(keys))

    async def _fetch(self) -> dict[str | None, dict[str, Any]]:
        import httpx

        async with httpx.AsyncClient(timeout=self.cfg.timeout, follow_redirects=False) as client:
            if self._jwks_uri is None:
                self._jwks_uri = await self._discover(client)
            jwks = await _json(client, self._jwks_uri, self.cfg.timeout)
        keys = jwks.get("keys") if isinstance(jwks, dict) else None
        if not isinstance(keys, list):
            raise ValueError(f"{self._jwks_uri} is not a JWK set")
        return {k.get("kid"): k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"
                and k.get("kty") in KEY_TYPES.values()}  # never an `oct` (shared secret) key

    async def _discover(self, client: Any) -> str:
        """jwks_uri from the issuer's OpenID discovery document (or RFC 8414's), whose issuer must be ours."""
        issuer = self.cfg.issuer.rstrip("/")
        parts = urlsplit(issuer)
        rfc8414 = urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + parts.path, "", ""))
        problems = []
        for url in (issuer + "/.well-known/openid-configuration", rfc8414):
            try:
                doc = await _json(client, url, self.cfg.timeout)
            except (OSError, ValueError) as e:
                problems.append(str(e))
                continue
            if not isinstance(doc, dict) or doc.get("issuer") != self.cfg.issuer:
                raise ValueError(f"{url}: its issuer is not security.http.oauth.issuer")
            uri = doc.get("jwks_uri")
            if not isinstance(uri, str) or urlsplit(uri).scheme not in ("https", urlsplit(issuer).scheme):
                raise ValueError(f"{url}: no usable jwks_uri")
            return uri
        raise ValueError("no discovery document: " + "; ".join(problems))


async def _json(client: Any, url: str, timeout: float) -> Any:
    """The JSON document at `url`, read whole within `timeout` seconds in all (httpx's timeout bounds each
    read, so an issuer sending a byte at a time would hold the keys' lock for ever) and at most
    MAX_DOCUMENT_BYTES; any failure a ValueError naming the url, never the body."""
    try:
        body = await asyncio.wait_for(_read(client, url), timeout)
    except TimeoutError:
        raise ValueError(f"{url}: no whole answer within {timeout:g} s") from None
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError(f"{url}: the JSON is nested too deeply") from None


async def _read(client: Any, url: str) -> bytes:
    import httpx

    body = bytearray()
    try:
        async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code != 200:
                raise ValueError(f"{url}: HTTP {response.status_code}")
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise ValueError(f"{url}: over {MAX_DOCUMENT_BYTES} bytes")
    except httpx.HTTPError as e:
        raise ValueError(f"{url}: {type(e).__name__}") from None
    return bytes(body)


__all__ = ["METADATA_PATH", "InvalidToken", "IssuerUnavailable", "Verifier", "challenge", "insufficient_scope", "metadata",
           "metadata_paths", "metadata_url"]
