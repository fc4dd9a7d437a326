"""The home's admin REST, served in the test's own process.

A command run with ``main([...])`` in a test talks to the admin REST app its home's
standalone serves on the private socket: the same app (:func:`cursorops.wire.web.web_app`
behind :class:`~cursorops.wire.web.SocketDoor`, so requests are the socket's), called
in-process instead of through a background process, so that hundreds of test homes
start no process each. Commands run as subprocesses (``tests/cli/test_cli.py``, the
README) take the real path: a background standalone per home, over its socket.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from cursorops.cli.transport import Answer
from cursorops.core.domain.config import Config


class InProcessTransport:
    """A :class:`~cursorops.cli.transport.Transport` whose broker is an app in this process."""

    def __init__(self, client: Any, headers: Mapping[str, str]) -> None:
        self.where = "in-process"
        self._client = client
        self._headers = dict(headers)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        sent = {**self._headers, **(headers or {})}
        options: dict[str, Any] = {"params": dict(query or {}), "headers": sent}
        if body is not None:
            options["json"] = body
        answer = self._client.request(method, path, **options)
        return Answer(answer.status_code, answer.content, dict(answer.headers))


class Homes:
    """One in-process app per home and metadata store, made on first use."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], Any] = {}

    def transport(self, home: str, metadata_url: str | None, role: str) -> InProcessTransport:
        from cursorops.core.domain.admin_socket import ROLE_HEADER
        from cursorops.core.domain.header_text import header_value

        key = (os.path.realpath(os.path.expanduser(home)), metadata_url or "")
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._client(home, metadata_url)
        return InProcessTransport(client, {ROLE_HEADER: header_value(role)})

    def _client(self, home: str, metadata_url: str | None) -> Any:
        from fastapi.testclient import TestClient

        from cursorops.core.services.broker import Broker
        from cursorops.wire.standalone import bootstrap
        from cursorops.wire.web import SocketDoor, web_app

        config = Config.from_environ(
            {**os.environ, "CURSOROPS_HOME": home, "CURSOROPS_METADATA_URL": metadata_url or ""}
        )
        # As the background standalone: a fresh home has public/default.
        bootstrap(Broker(config), "admin")
        app = web_app(config, "admin", None)
        door = SocketDoor(app, lambda: {"home": home}, lambda: None)
        return TestClient(door, raise_server_exceptions=False)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def serve_homes_in_process(monkeypatch: Any) -> Iterator[None]:
    """Point ``main()``'s home transport at in-process apps for the test's duration."""
    import cursorops.cli.main

    homes = Homes()
    monkeypatch.setattr(cursorops.cli.main, "home_transport", homes.transport)
    try:
        yield
    finally:
        homes.close()
