"""The CLI's HTTP on the home's socket: what it sends, and answers read whole."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from cursorops.cli.transport import Transport
from cursorops.core.domain.errors import InvalidArgumentError, StandaloneError


def _serve_once(path: Path, answer: bytes) -> tuple[threading.Thread, list[bytes]]:
    """A socket that reads one request, records it, and sends ``answer``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    seen: list[bytes] = []

    def serve() -> None:
        with server, server.accept()[0] as conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            while len(body) < length:
                body += conn.recv(4096)
            seen.append(head + b"\r\n\r\n" + body)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread, seen


def test_a_chunked_answer_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    answer = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n"
        b"4\r\n[1, \r\n3\r\n2]\n\r\n0\r\n\r\n"
    )
    thread, seen = _serve_once(path, answer)
    got = Transport(socket_path=str(path), headers={"X-Cursorops-Role": "UTF-8''%C3%A5"}).request(
        "POST", "/admin/v2/x", query={"a": "b c"}, body={"k": "ü"}
    )
    thread.join(5)
    assert (got.status, got.document()) == (200, [1, 2])
    request = seen[0]
    assert request.startswith(b"POST /admin/v2/x?a=b+c HTTP/1.1\r\n")
    assert b"\r\nX-Cursorops-Role: UTF-8''%C3%A5\r\n" in request
    assert request.endswith(b'\r\n\r\n{"k": "\\u00fc"}')


def test_a_line_break_in_a_header_is_refused_before_sending(tmp_path: Path) -> None:
    transport = Transport(socket_path=str(tmp_path / "none.sock"))
    with pytest.raises(InvalidArgumentError, match="line break"):
        transport.request("GET", "/x", headers={"X-Cursorops-Reason": "a\r\nX-Evil: 1"})


def test_nothing_listening_is_a_standalone_error_the_caller_may_retry(tmp_path: Path) -> None:
    with pytest.raises(StandaloneError, match="Cannot reach the broker"):
        Transport(socket_path=str(tmp_path / "none.sock")).request("GET", "/x")
