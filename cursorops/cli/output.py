"""Rendering for the ``cursorops`` command: text for people, JSON for scripts.

In JSON mode each command writes exactly one JSON document on stdout; in text
mode it writes lines meant to be read. Both come from the same plain values
built here, so the two modes cannot disagree.

Text someone else wrote (a subscription's name, a key, a property, a payload, a role) is
shown in text mode as the Cursors pages show it (:func:`theirs`): legible, and cut after
:data:`~cursorops.core.domain.legible.CELL_CHARS` characters with the cut said; JSON keeps it
whole. A table's columns are aligned on the width each cell takes in a terminal.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from cursorops.core.domain.legible import CELL_CHARS, columns, cut, legible

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cursorops.core.domain.analysis.backlog import TopicAnalysis
    from cursorops.core.domain.ids.message_id import MessageId
    from cursorops.core.services.reading.dispatch import Message


def theirs(value: object) -> str:
    """Someone else's text as a line shows it: legible, cut after
    :data:`~cursorops.core.domain.legible.CELL_CHARS` characters, ``… (N more characters)``."""
    return cut("" if value is None else str(value), CELL_CHARS)


def emit_json(document: object, out: TextIO = sys.stdout) -> None:
    json.dump(document, out, indent=2, sort_keys=False)
    out.write("\n")


def format_time(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def id_json(message_id: MessageId) -> dict[str, object]:
    return {
        "triplet": message_id.triplet(),
        "base64": message_id.to_base64(),
        "messageId": message_id.client_text(),
        "partition": message_id.partition,
        "batchIndex": message_id.batch_index,
        "batchSize": message_id.batch_size,
    }


def id_line(message_id: MessageId) -> str:
    """Triplet, base64, partition and the Python client's printed form, aligned for reading:
    every form a command takes an id in."""
    return id_text(id_json(message_id))


def id_text(doc: Mapping[str, Any]) -> str:
    """:func:`id_line` of an id's JSON form (:func:`id_json`), as an answer carries it."""
    return (
        f"{doc['triplet']:<12}  {doc['base64']:<16}  partition={doc['partition']}  "
        f"{doc['messageId']}"
    )


def payload_json(payload: bytes) -> tuple[str, str]:
    """The payload as text when it is UTF-8, else base64; with the encoding used."""
    try:
        return payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(payload).decode("ascii"), "base64"


def message_json(message: Message) -> dict[str, object]:
    """A message as JSON. An encrypted payload is never shown: its size and the names of
    its keys are (``payloadEncoding`` "encrypted"); a chunk names its message's size."""
    if message.encryption_keys is not None:
        payload, encoding = "", "encrypted"
    else:
        payload, encoding = payload_json(message.payload)
    doc: dict[str, object] = {
        **id_json(message.message_id),
        "topic": message.topic,
        "key": message.key,
        "properties": dict(message.properties),
        "payload": payload,
        "payloadEncoding": encoding,
        "publishTime": message.publish_time,
        "deliverAt": message.deliver_at,
        "redeliveryCount": message.redelivery_count,
    }
    # Only when the producer set them (binary-protocol producers), as Pulsar's peek
    # answers them only when present.
    if message.event_time is not None:
        doc["eventTime"] = message.event_time
    if message.ordering_key is not None:
        doc["orderingKey"] = base64.b64encode(message.ordering_key).decode("ascii")
    if message.null_value:
        doc["nullValue"] = True
    if message.encryption_keys is not None:
        doc["encryptionKeys"] = list(message.encryption_keys)
        doc["payloadSize"] = message.stored_size or 0
    if message.chunk is not None:
        uuid, chunk_id, chunks, size = message.chunk
        doc["chunk"] = {"uuid": uuid, "chunkId": chunk_id, "chunks": chunks}
        doc["payloadSize"] = size
    return doc


def whole_messages(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with a chunked message shown once, at its first chunk listed (its
    other chunks are the same message)."""
    seen: set[str] = set()
    out = []
    for message in messages:
        if message.chunk is not None:
            if message.chunk[0] in seen:
                continue
            seen.add(message.chunk[0])
        out.append(message)
    return out


def message_line(doc: Mapping[str, Any]) -> str:
    """One message for reading, from its JSON form (:func:`message_json`)."""
    properties = ",".join(
        f"{theirs(k)}={theirs(v)}" for k, v in sorted(dict(doc["properties"]).items())
    )
    if doc["payloadEncoding"] == "encrypted":
        names = ",".join(theirs(name) for name in doc.get("encryptionKeys") or [])
        payload = f"<encrypted: {doc.get('payloadSize', 0)} bytes, keys {names}>"
    elif doc.get("chunk") is not None:
        chunk = doc["chunk"]
        payload = f"<chunked message: {doc.get('payloadSize')} bytes in {chunk['chunks']} chunks>"
    elif doc.get("nullValue"):
        payload = "<null value>"
    elif doc["payloadEncoding"] == "utf-8":
        payload = theirs(doc["payload"])
    else:
        payload = f"base64:{theirs(doc['payload'])}"
    parts = [
        f"{doc['triplet']:<12}",
        f"partition={doc['partition']}",
        f"key={theirs(doc['key']) if doc['key'] is not None else '-'}",
    ]
    if properties:
        parts.append(f"properties={properties}")
    if doc.get("deliverAt") is not None:
        parts.append(f"deliver_at={format_time(doc['deliverAt'])}")
    if doc.get("eventTime") is not None:
        parts.append(f"event_time={format_time(doc['eventTime'])}")
    if doc.get("orderingKey") is not None:
        parts.append(f"ordering_key=base64:{doc['orderingKey']}")
    parts.append(f"payload={payload}")
    return "  ".join(parts)


_ANALYSIS_COLUMNS = (
    ("entries", "entries"),
    ("messages", "messages"),
    ("filter_accepted_messages", "accepted"),
    ("filter_rejected_messages", "rejected"),
    ("filter_rescheduled_messages", "rescheduled"),
    ("first_message_id", "first"),
    ("last_message_id", "last"),
    ("aborted", "aborted"),
)


_ANALYSIS_FIELDS = (
    "entries",
    "messages",
    "filterAcceptedMessages",
    "filterRejectedMessages",
    "filterRescheduledMessages",
    "firstMessageId",
    "lastMessageId",
    "aborted",
)
""":data:`_ANALYSIS_COLUMNS` as the analysis's JSON names them."""


def analysis_lines(analysis: TopicAnalysis) -> list[str]:
    return analysis_document_lines(analysis.to_pulsar_json())


def analysis_document_lines(analysis: Mapping[str, Any]) -> list[str]:
    """The table of an analysis's JSON document (:meth:`TopicAnalysis.to_pulsar_json
    <cursorops.core.domain.analysis.backlog.TopicAnalysis.to_pulsar_json>`)."""

    def cells(result: Mapping[str, Any]) -> list[str]:
        return [_cell(result.get(name)) for name in _ANALYSIS_FIELDS]

    table: list[list[str]] = [["partition", "subscription", *(h for _, h in _ANALYSIS_COLUMNS)]]
    topic = analysis["topic"]
    for row in analysis["partitions"]:
        partition = row["topicPartition"]
        table.append(
            [
                partition.removeprefix(topic + "-") if partition != topic else "-",
                theirs(row["subscription"]),
                *cells(row),
            ]
        )
    subs = analysis["subscriptions"]
    if len(subs) > 1:
        for name, value in subs.items():
            table.append(["total", theirs(name), *cells(value)])
    label = analysis["subscription"] or ("*" if len(subs) != 1 else next(iter(subs)))
    table.append(["TOTAL", theirs(label), *cells(analysis["total"])])
    return [f"Backlog of {topic} (exact, uncapped):", *_align(table)]


def stats_lines(stats: Mapping[str, Any]) -> list[str]:
    """A topic's stats (Pulsar's JSON, as ``/stats`` answers) for people."""
    index = stats.get("partitionIndex")
    lines = [
        f"topic:         {stats['topic']}",
        f"partitions:    {stats['partitions']}"
        if index is None
        else f"partition:     {index} (of {stats['partitions']})",
        f"entries:       {stats['entries']}",
        f"messages:      {stats['messages']}",
    ]
    if not stats["subscriptions"]:
        lines.append("subscriptions: none")
    for name, sub in stats["subscriptions"].items():
        lines.append(f"subscription {theirs(name)} ({sub['type']}):")
        lines.append(f"  msgBacklog (messages, exact): {sub['msgBacklog']}")
        lines.append(f"  backlogEntries:               {sub['backlogEntries']}")
        lines.append(f"  individuallyDeletedRanges:    {sub['individuallyDeletedRanges']}")
        lines.append(f"  partlyAckedBatches:           {sub['partlyAckedBatches']}")
        for partition, position in sub["markDeletePosition"].items():
            lines.append(f"  markDeletePosition {partition}: {position}")
        if sub["properties"]:
            shown = ",".join(
                f"{theirs(k)}={theirs(v)}" for k, v in sorted(sub["properties"].items())
            )
            lines.append(f"  properties: {shown}")
    return lines


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _align(table: list[list[str]]) -> list[str]:
    """The rows, each cell legible and padded to its column's width in a terminal: the
    width a cell takes as shown (a spelled-out character takes its spelling's, a CJK
    character two columns), not its count of characters."""
    shown = [[legible(cell) for cell in row] for row in table]
    widths = [max(columns(row[i]) for row in shown) for i in range(len(shown[0]))]
    return [
        "  "
        + "  ".join(
            cell + " " * (w - columns(cell)) for cell, w in zip(row, widths, strict=True)
        ).rstrip()
        for row in shown
    ]


def open_request_lines(requests: list[dict[str, Any]]) -> list[str]:
    """Requests planned and never closed: each with the plan digest its approvers saw."""
    lines = []
    for r in requests:
        lines.append(
            f"{format_time(r['plannedAtMs'])}  {r['operation']}  {theirs(r['subscription'])}  "
            f"asked by {theirs(r['requester'])}  run {theirs(r['runId'])} of {r['dagId']}  "
            + ("APPLIED, not closed" if r["applied"] else "not applied")
        )
        lines.append(f"  plan {r['planDigest']}")
    return lines or ["No open requests"]
