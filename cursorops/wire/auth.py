"""Pulsar's token authentication: HS256 JSON Web Tokens signed with a secret key.

What ``pulsar tokens create --secret-key`` makes and ``AuthenticationToken``
sends: ``header.payload.signature`` in base64url, the role in the ``sub``
claim, an optional ``exp`` (epoch seconds). Only HS256 is accepted (no
``alg: none``, no public keys).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from pathlib import Path


class AuthenticationError(Exception):
    """The client's credentials are refused (its request is answered ``AuthenticationError``
    and its connection closed)."""


def load_secret(spec: str) -> bytes:
    """The key from ``data:;base64,<key>``, ``file:///path`` or a path (raw key bytes, as
    ``pulsar tokens create-secret-key --output`` writes them)."""
    if spec.startswith("data:"):
        _, _, encoded = spec.partition(",")
        try:
            return base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"Invalid secret key data: {exc}") from exc
    path = spec.removeprefix("file://")
    return Path(path).expanduser().read_bytes()


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def create_token(secret: bytes, role: str, expires_at: int | None = None) -> str:
    """An HS256 token for ``role`` (what ``pulsar tokens create`` prints)."""

    def part(value: dict[str, object]) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    claims: dict[str, object] = {"sub": role}
    if expires_at is not None:
        claims["exp"] = expires_at
    signing = f"{part({'alg': 'HS256'})}.{part(claims)}"
    signature = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


class TokenAuthenticator:
    def __init__(self, secret: bytes, clock: Callable[[], float] = time.time) -> None:
        if not secret:
            raise ValueError("The token secret key is empty")
        self._secret = secret
        self._clock = clock

    def role(self, token: str) -> str:
        """The role a valid token names; :class:`AuthenticationError` otherwise."""
        try:
            header_b64, payload_b64, signature_b64 = token.strip().split(".")
            header = json.loads(_b64url(header_b64))
            claims = json.loads(_b64url(payload_b64))
            signature = _b64url(signature_b64)
        except (ValueError, binascii.Error) as exc:
            raise AuthenticationError("Malformed token") from exc
        if not isinstance(header, dict) or header.get("alg") != "HS256":
            raise AuthenticationError("Only HS256 tokens are accepted")
        expected = hmac.new(
            self._secret, f"{header_b64}.{payload_b64}".encode(), hashlib.sha256
        ).digest()
        if not hmac.compare_digest(signature, expected):
            raise AuthenticationError("Token signature mismatch")
        if not isinstance(claims, dict) or not isinstance(claims.get("sub"), str):
            raise AuthenticationError("Token has no subject")
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp < self._clock():
            raise AuthenticationError("Token expired")
        role: str = claims["sub"]
        return role
