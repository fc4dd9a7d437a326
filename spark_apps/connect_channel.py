"""The gRPC channel to a Spark Connect server that requires a token.

A server started with ``spark.connect.authenticate.token`` (or the environment's
``SPARK_CONNECT_AUTHENTICATE_TOKEN``, as ``scripts/spark-connect-up.sh`` does) refuses
every call without the header ``Authorization: Bearer <token>``, with
``UNAUTHENTICATED``. The client names the token in its URL
(``sc://host:port/;token=...``), else pyspark takes it from the same environment
variable.

pyspark's own channel sends a token only over TLS (``use_ssl=true``), or over
loopback when the host is spelled ``localhost``: to a plaintext server at
``127.0.0.1`` or ``spark-connect`` it opens a TLS handshake the server never
answers, and the session hangs. The Connect server speaks no TLS of its own, so
:class:`TokenChannelBuilder` sends the token as that header over plaintext gRPC
unless the URL asks for TLS (docs/decisions/2026-12-07-spark-connect-requires-a-token.md):
it keeps out whoever does not hold the token, not whoever can read the traffic.
"""

from __future__ import annotations

from typing import Any

import grpc
from pyspark.sql.connect.client import DefaultChannelBuilder

__all__ = ["TokenChannelBuilder"]


class _BearerToken(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    """Adds ``authorization: Bearer <token>`` to every call's metadata."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> Any:
        return details._replace(metadata=[*(details.metadata or ()), self._header])

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._with_token(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._with_token(details), requests)


class TokenChannelBuilder(DefaultChannelBuilder):
    """pyspark's channel for ``url``, except that a token without ``use_ssl=true`` goes as a
    bearer header over plaintext gRPC instead of forcing TLS. Without a token it is
    pyspark's insecure channel; with ``use_ssl=true``, pyspark's TLS channel."""

    def toChannel(self) -> grpc.Channel:  # noqa: N802 (pyspark's name)
        token = self.token
        if token is None or self.use_ssl:
            return super().toChannel()
        channel = grpc.insecure_channel(self.endpoint, options=self._effective_channel_options())
        return grpc.intercept_channel(channel, _BearerToken(token), *self._interceptors)
