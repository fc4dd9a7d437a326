"""Pulsar's basic authentication: a user and password checked against an htpasswd file.

What ``AuthenticationBasic`` sends (``user:password`` in the CONNECT command,
``Authorization: Basic`` on HTTP), checked against ``user:hash`` lines. Only
bcrypt hashes (``htpasswd -B``) are accepted: the MD5 and DES crypt forms
Pulsar's provider also reads are refused when the file is loaded, as they are
cheap to brute-force (DES crypt reads only 8 characters of a password).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from pathlib import Path

import bcrypt

from cursorops.wire.auth import AuthenticationError

_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
_CACHE_SIZE = 1024
"""Verified credentials remembered (as keyed digests), so a client's every HTTP lookup does
not pay a bcrypt check."""


def load_htpasswd(path: str) -> dict[str, bytes]:
    """user -> bcrypt hash from an htpasswd file; ValueError names the first bad line."""
    users: dict[str, bytes] = {}
    text = Path(path).expanduser().read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user:
            raise ValueError(f"{path} line {number}: expected user:hash")
        if not hashed.startswith(_BCRYPT_PREFIXES):
            raise ValueError(
                f"{path} line {number}: user {user!r} has no bcrypt hash; only bcrypt "
                "(htpasswd -B) is accepted, never plaintext, MD5 or DES crypt"
            )
        users[user] = hashed.encode("ascii")
    if not users:
        raise ValueError(f"{path} names no user")
    return users


class BasicAuthenticator:
    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._users = dict(users)
        self._key = secrets.token_bytes(32)
        self._verified: dict[bytes, str] = {}
        # Checked against for an unknown user, so that a refusal takes as long whether or
        # not the user exists (no user enumeration by timing).
        self._decoy = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt())

    @classmethod
    def from_file(cls, path: str) -> BasicAuthenticator:
        return cls(load_htpasswd(path))

    def role(self, credentials: bytes) -> str:
        """The user of valid ``user:password`` credentials; :class:`AuthenticationError`
        otherwise (one message for an unknown user and a wrong password)."""
        user_bytes, sep, password = credentials.partition(b":")
        if not sep:
            raise AuthenticationError("Basic credentials must be user:password")
        digest = hmac.new(self._key, credentials, hashlib.sha256).digest()
        known = self._verified.get(digest)
        if known is not None:
            return known
        user = user_bytes.decode("utf-8", "replace")
        hashed = self._users.get(user)
        matches = bcrypt.checkpw(password, hashed or self._decoy)
        if hashed is None or not matches:
            raise AuthenticationError("Unknown user or wrong password")
        if len(self._verified) >= _CACHE_SIZE:
            self._verified.clear()
        self._verified[digest] = user
        return user
