"""How the CLI reaches a broker's admin REST: the home's own standalone over its private
Unix socket, or a deployment's ``--admin-url`` over HTTP(S) with a token.

Standard library only (``http.client``): it is on every command's path, and a small
command on a warm home answers in a fraction of a second.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

if TYPE_CHECKING:
    import http.client

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
                from cursorops.core.domain.errors import InvalidArgumentError

                raise InvalidArgumentError(
                    f"Invalid --admin-url {url!r}: expected http(s)://HOST[:PORT][/PREFIX]"
                )
            self._scheme = parts.scheme
            self._netloc = parts.netloc
            self._prefix = parts.path.rstrip("/")

    def _connection(self) -> http.client.HTTPConnection:
        import http.client  # with its e-mail parser: for --admin-url only
        import ssl

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
        payload = b""
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            sent["Content-Type"] = "application/json"
        if self._socket_path is not None:
            return _exchange(self._socket_path, method, target, sent, payload, self._timeout)
        return self._over_http(method, target, sent, payload)

    def _over_http(self, method: str, target: str, sent: dict[str, str], payload: bytes) -> Answer:
        import http.client

        from cursorops.core.domain.errors import StoreError

        connection = self._connection()
        try:
            connection.request(method, target, body=payload or None, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, response.read(), dict(response.getheaders()))
        except (OSError, http.client.HTTPException) as exc:
            raise StoreError(f"Cannot reach the broker at {self.where}: {exc}") from exc
        finally:
            connection.close()


def _exchange(
    path: str, method: str, target: str, sent: Mapping[str, str], payload: bytes, timeout: float
) -> Answer:
    """One HTTP/1.1 request on the home's socket, the connection closed after it: the
    request line, the headers, the body; then the answer read to its end."""
    from cursorops.core.domain.errors import StandaloneError, StoreError

    if any(ch in text for item in sent.items() for text in item for ch in "\r\n"):
        from cursorops.core.domain.errors import InvalidArgumentError

        raise InvalidArgumentError("A header of the request holds a line break")
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in sent.items()]
    lines.append(f"Content-Length: {len(payload)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
    where = f"unix:{path}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(path)
        except OSError as exc:
            raise StandaloneError(f"Cannot reach the broker at {where}: {exc}") from exc
        chunks = []
        try:
            conn.sendall(request)
            while chunk := conn.recv(1 << 16):
                chunks.append(chunk)
        except OSError as exc:
            raise StoreError(f"Cannot reach the broker at {where}: {exc}") from exc
    head, separator, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if not separator or len(parts) < 2 or not parts[1].isdigit():
        raise StoreError(f"The broker at {where} gave no HTTP answer")
    found: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    if "chunked" in found.get("transfer-encoding", "").lower():
        body = unchunked(body)
    return Answer(int(parts[1]), body, found)


def unchunked(body: bytes) -> bytes:
    """A chunked HTTP/1.1 body, joined."""
    out = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(out)


def segment(value: str) -> str:
    """One path segment, every reserved character escaped."""
    return quote(value, safe="")
