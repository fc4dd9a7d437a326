"""A cap on request bodies, enforced before a body is read into memory.

A declared ``Content-Length`` above the cap is refused at once; a body sent
without one (chunked) is counted as it streams and refused as soon as it
passes the cap; the route then sees a disconnected client and its answer is
dropped. Either way the answer is 413 with a ``{"reason"}`` body and the
route never gets the body.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""8 MiB: :data:`MAX_SKIP_IDS` ids fit in the widest PIP-423 shape (docs/decisions/)."""
MAX_SKIP_IDS = 100_000
"""Ids per skipByMessageIds call: the benchmark's 100,000 take about 3 s; 1,000,000 would
hold a request for half a minute, so larger skips are refused with 413 (docs/decisions/)."""
MAX_BODY_ENV = "CURSOROPS_API_MAX_BODY_BYTES"


class BodyLimit:
    """ASGI middleware: 413 for a body larger than ``limit()`` bytes."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.limit()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            text = declared.decode("latin-1").strip()
            if not (text.isascii() and text.isdigit()):
                await _refuse(send, 400, f"Invalid Content-Length {text!r}")
                return
            if int(text) > cap:
                await _refuse(send, 413, too_large(cap))
                return
        seen = 0
        refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    # The route is still reading its body, so nothing was sent yet:
                    # answer now, and let the route see a client that went away.
                    refused = True
                    await _refuse(send, 413, too_large(cap))
                    return {"type": "http.disconnect"}
            return message

        async def quiet_after_refusal(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted, quiet_after_refusal)


def too_large(cap: int) -> str:
    return f"Request body too large: more than {cap} bytes ({MAX_BODY_ENV})"


async def _refuse(send: Send, status: int, text: str) -> None:
    body = json.dumps({"reason": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
