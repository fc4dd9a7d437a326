"""Producing and consuming messages, as pulsar-client's ``produce`` and ``consume`` do.

Pulsar's own REST producer takes schema-specific payloads; cursorops's paths take the
exact bytes (base64), so that a payload reaches the topic as the command line gave it,
UTF-8 or not.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from cursorops.operations.declaration import (
    SUBSCRIPTION,
    SUBSCRIPTION_PATH,
    TOPIC,
    TOPIC_PATH,
    Call,
    Param,
    operation,
)

MAX_PRODUCE = 1_000_000
"""Messages one ``produce`` call may send (``-m`` values times ``--num-produce``)."""


def _base64_payloads(texts: list[str]) -> list[str]:
    import os

    # The exact bytes of the command line (os.fsencode undoes the surrogate escapes).
    return [base64.b64encode(os.fsencode(text)).decode("ascii") for text in texts]


def _shape_produce(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The payloads as base64 of the command line's exact bytes."""
    return None, {**given, "messages": _base64_payloads(given["messages"])}


def _produced_lines(answer: Any, _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import id_text

    return [id_text(doc) for doc in answer]


@operation(
    "produce",
    method="POST",
    path=TOPIC_PATH + "/messages",
    params=(
        TOPIC,
        Param(
            "messages",
            where="body",
            kind=list,
            repeat=True,
            flags=("-m", "--messages"),
            metavar="MSG",
            help="a message payload (its exact bytes); repeatable",
            raw=True,
            limit=MAX_PRODUCE,
        ),
        Param(
            "num_produce",
            where="body",
            kind=int,
            wire="numProduce",
            flags=("-n", "--num-produce"),
            default=1,
            help="send the messages this many times",
        ),
        Param("key", where="body", flags=("-k", "--key"), default=None, help="message key"),
        Param(
            "properties",
            where="body",
            kind=list,
            repeat=True,
            flags=("-p", "--properties"),
            default=None,
            metavar="KEY=VALUE",
            help="message property (k=v or k1=v1,k2=v2); repeatable",
            limit=10_000,
        ),
        Param(
            "batch_size",
            where="body",
            kind=int,
            wire="batchSize",
            flags=("--batch-size",),
            default=1,
            help="messages per batched entry (default 1: no batching); delayed ones are not "
            "batched",
        ),
        Param(
            "deliver_after",
            where="body",
            wire="deliverAfter",
            flags=("--deliver-after",),
            default=None,
            metavar="DURATION",
            help="delay: 10s, 5m, 1h, 2d",
        ),
        Param(
            "deliver_at",
            where="body",
            wire="deliverAt",
            flags=("--deliver-at",),
            default=None,
            metavar="TIME",
            help="delivery time: epoch ms or ISO-8601 (UTC if no offset)",
        ),
    ),
    help="produce messages (pulsar-client)",
    render=_produced_lines,
    shape=_shape_produce,
)
def produce(
    call: Call,
    topic: str,
    messages: list[str],
    num_produce: int,
    key: str | None,
    properties: list[str] | None,
    batch_size: int,
    deliver_after: str | None,
    deliver_at: str | None,
) -> list[dict[str, object]]:
    """Send each payload (base64 of the exact bytes) ``numProduce`` times; the ids they got."""
    import binascii

    from cursorops.cli import output, values
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.services.broker import wall_clock_ms
    from cursorops.core.services.producer import OutgoingMessage

    repeat = values.positive(num_produce, "--num-produce", MAX_PRODUCE)
    if not messages:
        raise InvalidArgumentError("Nothing to produce: give at least one -m MSG")
    if repeat * len(messages) > MAX_PRODUCE:
        raise InvalidArgumentError(
            f"Too many messages: {repeat} x {len(messages)}; at most {MAX_PRODUCE:,} per call"
        )
    batch = values.positive(batch_size, "--batch-size", MAX_PRODUCE)
    pairs = values.parse_pairs(properties, "--properties", split_commas=True)
    message_key = None if key is None else values.utf8_text(key, "--key")
    if deliver_after is not None and deliver_at is not None:
        raise InvalidArgumentError("Give --deliver-after or --deliver-at, not both")
    when: int | None = None
    if deliver_after is not None:
        when = values.deliver_after_ms(deliver_after, "--deliver-after", wall_clock_ms())
    elif deliver_at is not None:
        when = values.parse_time_ms(deliver_at, "--deliver-at", wall_clock_ms())
    try:
        payloads = [base64.b64decode(text, validate=True) for text in messages]
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgumentError(f"Invalid payload: not base64: {exc}") from exc
    outgoing = [
        OutgoingMessage(payload=payload, key=message_key, properties=dict(pairs), deliver_at=when)
        for _ in range(repeat)
        for payload in payloads
    ]
    ids = call.broker.producing.produce(call.role, topic, outgoing, batch_size=batch)
    return [output.id_json(m) for m in ids]


def _consumed_lines(answer: Any, values: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import message_line

    lines = [message_line(doc) for doc in answer]
    if not answer:
        lines.append("No message available")
    elif not values["ack"]:
        lines.append(f"{len(answer)} message(s) received, not acknowledged (use --ack)")
    else:
        lines.append(f"{len(answer)} message(s) received and acknowledged")
    return lines


@operation(
    "consume",
    method="POST",
    path=SUBSCRIPTION_PATH + "/receive",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "num_messages",
            kind=int,
            wire="numMessages",
            flags=("-n", "--num-messages"),
            default=1,
            help="messages to receive (default 1)",
        ),
        Param(
            "ack",
            kind=bool,
            flags=("--ack",),
            default=False,
            help="acknowledge what was received (default: do not)",
        ),
    ),
    help="receive messages (pulsar-client); --ack to acknowledge",
    render=_consumed_lines,
)
def consume(
    call: Call, topic: str, subscription: str, num_messages: int, ack: bool
) -> list[dict[str, object]]:
    """Receive up to ``numMessages`` messages available now on the subscription, as a
    consumer that joins it for the call; acknowledge them with ``ack``."""
    from cursorops.cli import output, values

    count = values.positive(num_messages, "--num-messages")
    messages = call.broker.reading.consume(call.role, topic, subscription, count, ack=ack)
    return [output.message_json(m) for m in messages]
