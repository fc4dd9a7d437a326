"""How the CLI reaches a broker's admin REST: the home's own standalone over its private
Unix socket, or a deployment's ``--admin-url`` over HTTP(S) with a token.

Standard library only (``http.client``): it is on every command's path, and a small
command on a warm home answers in a fraction of a second.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

TIMEOUT_S = 300.0
"""How long one request may take: an exact backlog analysis of a large topic runs inside it."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: Mapping[str, str]

    def document(self) -> Any:
        """The JSON answer, None when empty; non-JSON text as a string."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body.decode("utf-8", "replace")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class Transport:
    """One admin REST endpoint and the headers every request carries (who calls)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        socket_path: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        if (url is None) == (socket_path is None):
            raise ValueError("a transport needs exactly one of url and socket_path")
        self.where = url or f"unix:{socket_path}"
        self._socket_path = socket_path
        self._headers = dict(headers or {})
        self._timeout = timeout_s
        self._prefix = ""
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                from cursorops.core.errors import InvalidArgumentError

                raise InvalidArgumentError(
                    f"Invalid --admin-url {url!r}: expected http(s)://HOST[:PORT][/PREFIX]"
                )
            self._scheme = parts.scheme
            self._netloc = parts.netloc
            self._prefix = parts.path.rstrip("/")

    def _connection(self) -> http.client.HTTPConnection:
        if self._socket_path is not None:
            return _UnixConnection(self._socket_path, self._timeout)
        if self._scheme == "https":
            return http.client.HTTPSConnection(
                self._netloc, timeout=self._timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self._netloc, timeout=self._timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """Send one request; a broker that cannot be reached is a StoreError (a
        StandaloneError for the home's socket: nothing was sent, the caller may retry)."""
        target = self._prefix + path + (f"?{urlencode(query)}" if query else "")
        sent = {**self._headers, **(headers or {}), "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            sent["Content-Type"] = "application/json"
        connection = self._connection()
        try:
            connection.connect()
        except OSError as exc:
            from cursorops.core.errors import StandaloneError, StoreError

            connection.close()
            kind = StandaloneError if self._socket_path is not None else StoreError
            raise kind(f"Cannot reach the broker at {self.where}: {exc}") from exc
        try:
            connection.request(method, target, body=payload, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, response.read(), dict(response.getheaders()))
        except (OSError, http.client.HTTPException) as exc:
            from cursorops.core.errors import StoreError

            raise StoreError(f"Cannot reach the broker at {self.where}: {exc}") from exc
        finally:
            connection.close()


def segment(value: str) -> str:
    """One path segment, every reserved character escaped."""
    return quote(value, safe="")
