"""A real OpenID Connect provider for the tests: the npm package oidc-provider (pinned; `make
oidc-provider` installs it into .cache/oidc-provider) run by Node on 127.0.0.1 through
oidc_provider.mjs beside this file. Client-credentials clients with scopes and groups; tokens asked
for a resource are JWTs with that `aud` (RFC 8707); `rotate()` restarts it on the same port with a new
signing key (the issuer's key rotation). Also what a hostile client would make of a real token:
`forged` (alg none, payload altered, signed by another key, HS256 with the public key, claims
re-signed with the issuer's own key)."""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
MODULES = ROOT / ".cache" / "oidc-provider" / "node_modules"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")


def missing() -> str | None:
    """Why the provider cannot run here (None: it can): no node, or the package not installed."""
    if shutil.which("node") is None:
        return "node is not installed (the OpenID provider of these tests runs on Node 20+)"
    if not (MODULES / "oidc-provider" / "lib" / "index.js").is_file():
        return "oidc-provider is not installed: run `make oidc-provider` (CI does)"
    return None


@dataclass
class Client:
    client_id: str
    scope: str  # the scopes it may ask for, space-separated
    groups: list[str] = field(default_factory=list)
    ttl: int = 300  # seconds its tokens live
    client_secret: str = ""

    def __post_init__(self) -> None:
        self.client_secret = self.client_secret or secrets.token_urlsafe(16)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Provider:
    """oidc-provider on 127.0.0.1:`port`, started at once; `stop()` ends it (tests call it)."""

    def __init__(self, folder: Path, clients: list[Client]) -> None:
        self.folder, self.clients = folder, {c.client_id: c for c in clients}
        self.port = _free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.generation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def key_file(self) -> Path:
        return self.folder / f"signing-key-{self.generation}.json"

    def start(self) -> None:
        config = {"modules": str(MODULES), "port": self.port, "keyFile": str(self.key_file),
                  "clients": [vars(c) for c in self.clients.values()]}
        path = self.folder / "provider.json"
        path.write_text(json.dumps(config))
        self.log = self.folder / f"provider-{self.generation}.log"
        self.proc = subprocess.Popen(["node", str(SCRIPT), str(path)], stdout=self.log.open("w"),
                                     stderr=subprocess.STDOUT)
        self._wait()

    def _wait(self, timeout: float = 30) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"oidc-provider exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"oidc-provider did not answer within {timeout} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def rotate(self) -> None:
        """The issuer's key rotation: the same issuer restarted with a new signing key (its JWKS has
        only the new key, so tokens signed by the old one no longer verify)."""
        self.stop()
        self.generation += 1
        self.start()

    def token(self, client_id: str, resource: str, scope: str | None = None) -> str:
        """A client-credentials access token of `client_id` for `resource` (its scopes by default)."""
        import httpx

        c = self.clients[client_id]
        reply = httpx.post(f"{self.issuer}/token", timeout=10, data={
            "grant_type": "client_credentials", "client_id": c.client_id, "client_secret": c.client_secret,
            "scope": c.scope if scope is None else scope, "resource": resource})
        reply.raise_for_status()
        return str(reply.json()["access_token"])

    def jwks_hits(self) -> int:
        """How many times this run of the provider served its keys."""
        import httpx

        return int(httpx.get(f"{self.issuer}/test/jwks-hits", timeout=5).json()["hits"])

    def private_jwk(self) -> dict[str, Any]:
        return dict(json.loads(self.key_file.read_text()))


# ---- what a hostile client makes of a real token --------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JWT's header and claims, unverified."""
    head, body, _ = token.split(".")
    return (json.loads(base64.urlsafe_b64decode(head + "==")), json.loads(base64.urlsafe_b64decode(body + "==")))


def forged(token: str, how: str, issuer_key: dict[str, Any] | None = None, **claims: Any) -> str:
    """`token` turned into an attack: `none` (alg none, no signature), `altered` (claims changed, the
    signature kept), `other-key` (re-signed by a new RSA key under the same kid), `hs256-public` (HS256
    with the issuer's public key as the secret), `issuer-key` (claims changed and re-signed with the
    issuer's own private key: only a claim check can refuse it)."""
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    header, body = parts(token)
    body = {k: v for k, v in {**body, **claims}.items() if v is not None}  # a claim given as None: left out
    signing_input = f"{_b64(json.dumps({**header, 'alg': 'none'}).encode())}.{_b64(json.dumps(body).encode())}"
    if how == "none":
        return signing_input + "."
    if how == "altered":
        return ".".join([token.split(".")[0], _b64(json.dumps(body).encode()), token.split(".")[2]])
    extra = {k: v for k, v in header.items() if k not in ("alg", "typ")}
    if how == "other-key":
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return jwt.encode(body, other, algorithm="RS256", headers=extra)
    assert issuer_key is not None, "hs256-public and issuer-key need the issuer's key (Provider.private_jwk)"
    private = jwt.PyJWK(issuer_key, algorithm="RS256").key
    if how == "issuer-key":
        return jwt.encode(body, private, algorithm="RS256", headers=extra)
    if how == "hs256-public":
        pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        head = _b64(json.dumps({**header, "alg": "HS256"}).encode())
        payload = _b64(json.dumps(body).encode())
        import hashlib
        import hmac

        signature = hmac.new(pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
        return f"{head}.{payload}.{_b64(signature)}"
    raise ValueError(f"no such forgery: {how}")


__all__ = ["Client", "Provider", "forged", "missing", "parts"]
