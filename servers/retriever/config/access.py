"""parameter.yaml's who-may-call-what (security.http.principals, security.http.oauth; docs/security.md):
principals with scopes, the collections they may read and write, and groups, reached by static tokens
stored as sha256 hashes, or by OAuth 2.1 access tokens (JWTs) of one issuer."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationInfo, field_validator

from .base import Section

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[str, ...] = get_args(Scope)
# What a JWT's signature may use: asymmetric only (never `none`, never an HS* secret that a published key would be)
Algorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
DEFAULT_COLLECTION = "default"  # how a grant names the default collection (collection_name "")
SHA256 = re.compile(r"[0-9a-f]{64}")
PATTERN = re.compile(r"[A-Za-z0-9_*?]{1,255}")
FIELD = re.compile(r"[A-Za-z0-9_-]{1,128}")
NAME = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")


def _pattern(value: str) -> str:
    if not PATTERN.fullmatch(value):
        raise ValueError("a collection pattern uses letters, digits, _ and the wildcards * and ?")
    return value


def _sha256(value: str) -> str:
    if not SHA256.fullmatch(value):  # the message never quotes the value: a plain token pasted here stays unseen
        raise ValueError("a token's sha256: 64 lower-case hex digits (printf %s \"$TOKEN\" | sha256sum)")
    return value


def _name(value: str) -> str:
    if not NAME.fullmatch(value):
        raise ValueError("a principal's name uses letters, digits and _ . @ : - (at most 128)")
    return value


def _field(value: str) -> str:
    if not FIELD.fullmatch(value):
        raise ValueError("security.visibility.field: a top-level metadata key (letters, digits, _ and -), e.g. acl")
    return value


CollectionPattern = Annotated[str, AfterValidator(_pattern)]
TokenHash = Annotated[str, AfterValidator(_sha256)]


class PrincipalConfig(Section):
    """One principal of static tokens: what it may do, where, and as whom."""

    name: Annotated[str, AfterValidator(_name)]  # in audit lines and errors
    scopes: list[Scope] = ["read"]  # read: read-only tools; write: document writes; admin: session, index builds
    read: list[CollectionPattern] = ["*"]  # collections it may read (`*` all, `default` the default one)
    write: list[CollectionPattern] = ["*"]  # collections it may write (with the write or admin scope)
    groups: list[str] = []  # the groups it belongs to
    # sha256 hex digests of its bearer tokens; several at once: rotation (add the new, later drop the old)
    token_sha256: list[TokenHash] = []


class Grant(Section):
    """Collections a group's members may read and write, besides oauth.read / oauth.write."""

    read: list[CollectionPattern] = []
    write: list[CollectionPattern] = []


def _https(value: str, key: str) -> str:
    """An absolute https URL (http only on loopback, for a test issuer), no fragment."""
    parts = urlsplit(value)
    if parts.fragment or not parts.hostname or parts.scheme not in ("https", "http"):
        raise ValueError(f"{key}: an absolute https URL without a fragment")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(f"{key}: https (plain http only on a loopback host)")
    return value


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OAuthConfig(Section):
    """OAuth 2.1 resource server: JWT access tokens of `issuer` (its keys from its discovery document,
    or `jwks_uri`), for this server's `resource` URI (their audience); scopes from `scope`, groups from
    `groups_claim`. Both come from here (or `--set`), never from a request."""

    issuer: str  # the authorization server's issuer identifier, e.g. https://login.example.com/realms/x
    resource: str  # this server's resource URI (RFC 8707), the tokens' `aud`, e.g. https://search.example.com/mcp
    jwks_uri: str | None = None  # default: the issuer's discovery document's jwks_uri
    algorithms: list[Algorithm] = ["RS256", "PS256", "ES256", "EdDSA"]  # accepted signature algorithms
    groups_claim: str = "groups"  # the claim holding the caller's groups (a list of strings)
    name_claim: str = "sub"  # the claim naming the caller (client_id when it has none)
    read: list[CollectionPattern] = ["*"]  # collections every token may read (with the read scope)
    write: list[CollectionPattern] = ["*"]  # collections every token may write (with the write or admin scope)
    groups: dict[str, Grant] = {}  # more collections per group (a group in the token's groups claim)
    leeway: float = Field(30.0, ge=0, le=300)  # seconds of clock skew allowed on exp / nbf / iat
    jwks_ttl: float = Field(3600.0, gt=0)  # seconds the issuer's keys are kept before they are fetched again
    jwks_refetch: float = Field(60.0, ge=0)  # an unknown `kid` fetches the keys again at most once per this many seconds
    timeout: float = Field(10.0, gt=0)  # seconds for a request to the issuer

    @field_validator("issuer", "resource", "jwks_uri")
    @classmethod
    def _url(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _https(value, str(info.field_name))

    @field_validator("algorithms")
    @classmethod
    def _some(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("algorithms: at least one of " + ", ".join(get_args(Algorithm)))
        return value


class VisibilityConfig(Section):
    """Document-level visibility (security/visibility.py): the metadata field naming who may see a
    document, and what a document without it is. The operator and principals with the admin scope see
    every document."""

    field: Annotated[str, AfterValidator(_field)]  # e.g. acl: a group name or a list of them; "*": everyone
    missing: Literal["hidden", "public"] = "hidden"  # a document without the field (or with a value not a name)


def check_principals(principals: list[PrincipalConfig]) -> None:
    """Names are unique, and a token hash belongs to one principal."""
    seen: set[str] = set()
    owner: dict[str, str] = {}
    for p in principals:
        if p.name in seen:
            raise ValueError(f"security.http.principals: the name {p.name!r} is used twice")
        seen.add(p.name)
        for digest in p.token_sha256:
            if digest in owner and owner[digest] != p.name:
                raise ValueError(f"security.http.principals: one token hash is listed for both {owner[digest]!r} "
                                 f"and {p.name!r}")
            owner[digest] = p.name


__all__ = ["DEFAULT_COLLECTION", "SCOPES", "Algorithm", "Grant", "OAuthConfig", "PrincipalConfig", "Scope",
           "VisibilityConfig", "check_principals"]
