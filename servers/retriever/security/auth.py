"""Who may come in at a server's door (the HTTP guard asks here): a bearer token that is one of the
static tokens (principals.py) or, in OAuth mode, a JWT access token of the YAML's issuer (oauth.py).
The answer is a principal, or a refusal with its status, message and `WWW-Authenticate`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..config import Config
from .oauth import InvalidToken, IssuerUnavailable, Verifier, challenge, metadata, metadata_paths
from .principals import Principal, StaticTokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Denied:
    status: int
    message: str
    headers: tuple[tuple[bytes, bytes], ...] = ()


class Access:
    """The static tokens and the OAuth verifier of one server. `closed`: every request needs a
    credential (some token was ever configured, or OAuth is on); a door once closed stays closed, so
    a tokens file emptied while the server runs never opens it."""

    def __init__(self, cfg: Config) -> None:
        self.oauth = cfg.security.http.oauth
        self.tokens = StaticTokens(cfg)
        self.verifier = Verifier(self.oauth) if self.oauth is not None else None
        self._closed = len(self.tokens) > 0 or self.verifier is not None
        self.metadata_paths = metadata_paths(self.oauth) if self.oauth is not None else set()
        self.metadata = metadata(self.oauth) if self.oauth is not None else None

    @property
    def closed(self) -> bool:
        if not self._closed and len(self.tokens) > 0:
            self._closed = True
        return self._closed

    def describe(self) -> str:
        parts = [f"{len(self.tokens)} static token(s)"] if len(self.tokens) else []
        if self.oauth is not None:
            parts.append(f"OAuth access tokens of {self.oauth.issuer} for {self.oauth.resource}")
        return ", ".join(parts) or "no token: loopback only"

    def challenge(self, error: str | None = None, description: str | None = None, scope: str | None = None) -> str:
        return challenge(self.oauth, error, description, scope)

    async def check(self, authorization: str) -> Principal | Denied:
        """The principal of a request's Authorization header, or why it is refused."""
        scheme, _, given = authorization.partition(" ")
        token = given.strip()
        if scheme.lower() != "bearer" or not token:
            return self._unauthorized("a valid bearer token is required (Authorization: Bearer <token>)")
        found = self.tokens.find(token)
        if found is not None:
            return found
        if self.verifier is None:
            return self._unauthorized("a valid bearer token is required (Authorization: Bearer <token>)",
                                      "invalid_token", "unknown token")
        try:
            return await self.verifier.principal(token)
        except InvalidToken as e:
            log.info("refused an access token: %s", e)
            return self._unauthorized(f"the access token is refused: {e}", "invalid_token", str(e))
        except IssuerUnavailable as e:
            return Denied(503, str(e), ((b"retry-after", b"5"),))

    def _unauthorized(self, message: str, error: str | None = None, description: str | None = None) -> Denied:
        return Denied(401, message, ((b"www-authenticate", self.challenge(error, description).encode()),))


__all__ = ["Access", "Denied"]
