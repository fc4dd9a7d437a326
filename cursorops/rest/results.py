"""Core's typed results as the JSON Pulsar's REST API answers with."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import Response

from cursorops.core.services.reading.dispatch import Message


def pulsar_json(result: Any) -> Any:
    """A core result (``to_pulsar_json()``), or plain JSON as it is."""
    if hasattr(result, "to_pulsar_json"):
        return result.to_pulsar_json()
    return result


def _header(value: object) -> str:
    # Header values are Latin-1 on the wire: percent-encode anything else.
    text = str(value)
    return text if text.isascii() and text.isprintable() else quote(text, safe="")


def message_response(message: Message, batch_size: int | None = None) -> Response:
    """A peeked message as Pulsar answers: the payload, its metadata in X-Pulsar-* headers."""
    headers: dict[str, str] = {
        "X-Pulsar-Message-ID": message.message_id.triplet(),
        "X-Pulsar-publish-time": datetime.datetime.fromtimestamp(
            message.publish_time / 1000, tz=datetime.UTC
        ).isoformat(timespec="milliseconds"),
        "X-Pulsar-producer-name": _header(message.producer_name),
        "X-Pulsar-sequence-id": str(message.sequence_id),
    }
    if message.event_time is not None:
        headers["X-Pulsar-event-time"] = datetime.datetime.fromtimestamp(
            message.event_time / 1000, tz=datetime.UTC
        ).isoformat(timespec="milliseconds")
    if message.ordering_key is not None:
        headers["X-Pulsar-ordering-key"] = _header(message.ordering_key.decode("latin-1"))
    if message.message_id.partition >= 0:
        headers["X-Pulsar-partition-index"] = str(message.message_id.partition)
    if message.key is not None:
        headers["X-Pulsar-partition-key"] = _header(message.key)
    if message.deliver_at is not None:
        headers["X-Pulsar-deliver-at-time"] = str(message.deliver_at)
    if message.message_id.batch_index >= 0:
        headers["X-Pulsar-batch-index"] = str(message.message_id.batch_index)
    if batch_size is not None:
        headers["X-Pulsar-num-batch-message"] = str(batch_size)
    properties: Mapping[str, str] = message.properties or {}
    for key, value in properties.items():
        headers[f"X-Pulsar-PROPERTY-{quote(str(key), safe='-_.')}"] = _header(value)
    return Response(
        content=bytes(message.payload), media_type="application/octet-stream", headers=headers
    )
