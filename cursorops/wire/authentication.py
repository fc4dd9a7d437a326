"""Who a client is, on the broker port and the web port alike.

Pulsar's broker asks the provider the client names (``auth_method_name`` in
CONNECT; the ``Authorization`` header's scheme, or the client certificate, on
HTTP). With no provider on, every client acts as the standalone's own role
(authentication off, as in Pulsar standalone). With providers on, a client
offering no credentials acts as the anonymous role (Pulsar's
``anonymousUserRole``) when one is set and the client connects from a
loopback address; otherwise it is refused.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from dataclasses import dataclass

from cursorops.wire.auth import AuthenticationError, TokenAuthenticator
from cursorops.wire.basic_auth import BasicAuthenticator

_NO_CREDENTIALS = ("", "none")


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Authentication:
    own_role: str
    """The role of every client while no provider is on."""
    token: TokenAuthenticator | None = None
    basic: BasicAuthenticator | None = None
    tls: bool = False
    """Pulsar's ``AuthenticationProviderTls``: the role is the client certificate's CN."""
    anonymous_role: str | None = None

    @property
    def enabled(self) -> bool:
        return self.token is not None or self.basic is not None or self.tls

    def methods(self) -> list[str]:
        on = [("token", self.token is not None), ("basic", self.basic is not None)]
        return [name for name, enabled in on if enabled] + (["tls"] if self.tls else [])

    def role(self, method: str, data: bytes, *, peer_cn: str | None, loopback: bool) -> str:
        """The role of a client offering ``data`` for ``method``; AuthenticationError if
        refused. ``peer_cn``: the CN of its verified certificate, if it presented one."""
        if not self.enabled:
            return self.own_role
        if method == "token" and self.token is not None:
            return self.token.role(data.decode("utf-8", "replace").removeprefix("token:"))
        if method == "basic" and self.basic is not None:
            return self.basic.role(data)
        if method == "tls" and self.tls:
            if peer_cn is None:
                raise AuthenticationError(
                    "TLS authentication needs a trusted client certificate with a common name"
                )
            return peer_cn
        # No credentials, or a method no provider serves: the anonymous role where one
        # is set, as Pulsar's ServerCnx falls back to anonymousUserRole when it finds no
        # provider for the method (the data offered is not read).
        if self.anonymous_role is not None and loopback:
            return self.anonymous_role
        if method in _NO_CREDENTIALS:
            raise AuthenticationError(
                f"Authentication is required (methods: {', '.join(self.methods())})"
            )
        enabled = ", ".join(self.methods())
        raise AuthenticationError(
            f"Authentication method {method!r} is not enabled (methods: {enabled})"
        )

    def http_role(self, authorization: str, *, peer_cn: str | None, loopback: bool) -> str:
        """The role of an HTTP request: its ``Authorization`` header (Bearer token, Basic
        credentials), else its client certificate, else the anonymous role."""
        scheme, _, value = authorization.strip().partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            return self.role("token", value.encode(), peer_cn=peer_cn, loopback=loopback)
        if scheme == "basic":
            try:
                credentials = base64.b64decode(value.strip(), validate=True)
            except binascii.Error as exc:
                raise AuthenticationError("Malformed basic credentials") from exc
            return self.role("basic", credentials, peer_cn=peer_cn, loopback=loopback)
        if scheme:
            raise AuthenticationError(f"Unsupported authorization scheme {scheme!r}")
        if peer_cn is not None and self.tls:
            return peer_cn
        return self.role("none", b"", peer_cn=peer_cn, loopback=loopback)
