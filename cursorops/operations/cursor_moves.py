"""The operations that move a subscription's cursor, each one gated request
(``Broker.request``): applied at once, or, on a namespace that requires approval, stored
as a plan record and handed to its workflow's run as the caller (202, nothing changed
until an approver other than the requester approves it).

Pulsar's paths: ``skipByMessageIds`` (PIP-423), ``skip/{numMessages}``, ``skip_all``
(clear-backlog) and ``resetcursor`` (to a time, or to a message id); cursorops's:
``undoSkip/{skipId}`` and ``redrive``. Pulsar answers the first four with 204; the CLI
asks for their outcome instead (``Prefer: return=representation``) and prints it.
The request carries the requester's arguments only: what gets applied is what the
broker plans from them, the plan record an approver reads.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cursorops.operations.declaration import (
    SUBSCRIPTION,
    SUBSCRIPTION_PATH,
    TOPIC,
    Call,
    Param,
    Reply,
    in_range,
    operation,
)

if TYPE_CHECKING:
    from cursorops.core.domain.ids.message_id import MessageId
    from cursorops.core.services.broker import PlannedRequest
    from cursorops.core.services.gating import GatedArguments, Pending
    from cursorops.rest.turns import Turns

INT64_MAX = 2**63 - 1
MAX_SKIP_HEAD = 2**62
"""The most messages ``skip/{numMessages}`` takes."""
SKIPS_AT_ONCE = 8
"""Skips one process runs at once; the others wait their turn before any work. A skip
locks the cursors of the partitions it touches, and the lock holders need the CPU: many
more skips in flight than a topic's partitions can take only compete with the holders for
the process's one interpreter lock. Those in flight that need the same cursors are written
together (core/domain/combining.py), so 8 rather than 4: bigger batches, less CPU per skip
(docs/decisions/, "REST under load"). Turns are taken in the order requests came."""
SKIP_ID_HEADER = "X-Cursorops-Skip-Id"
"""The applied skip's id on the 204 of ``skipByMessageIds``: the id ``undoSkip`` takes."""
_GATED_RESPONSES = {202: "Waiting for an approval in Airflow"}


@functools.cache
def _skip_turns() -> Turns:
    from cursorops.rest.turns import Turns

    return Turns(SKIPS_AT_ONCE)


def _requested(call: Call, operation_name: str, arguments: GatedArguments) -> Any:
    """The one door of every gated operation, as the caller, their run starter with them."""
    return call.broker.request(operation_name, call.caller, arguments, call.runs)


# -- rendering (the CLI's lines from the answers) -----------------------------------


def _id_document(message_id: MessageId) -> dict[str, object]:
    from cursorops.cli.output import id_json

    return id_json(message_id)


def _skip_lines(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import id_text as _id_line

    topic, subscription, skip_id = answer["topic"], answer["subscription"], answer["skipId"]
    lines = [
        f"Skipped {len(answer['skipped'])} message(s) on subscription {subscription} of {topic}",
        f"  skip id              {skip_id} (cursorops topics undo-skip "
        f"{topic} -s {subscription} --skip-id {skip_id})",
    ]
    lines += [f"  skipped              {_id_line(m)}" for m in answer["skipped"]]
    lines += [f"  already acknowledged {_id_line(m)}" for m in answer["alreadyAcknowledged"]]
    lines += [f"  acknowledged meanwhile {_id_line(m)}" for m in answer["acknowledgedMeanwhile"]]
    return lines


def _head_lines(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[str]:
    lines = [
        f"Skipped {answer['messages']} message(s) ({len(answer['skipped'])} id(s)) on "
        f"subscription {answer['subscription']} of {answer['topic']}"
    ]
    lines += [f"  {name}: {count} id(s)" for name, count in answer["perPartition"].items()]
    if answer["acknowledgedMeanwhile"]:
        lines.append(
            f"  {len(answer['acknowledgedMeanwhile'])} id(s) were acknowledged by a consumer "
            "meanwhile"
        )
    return lines


def _skip_outcome(result: Any, *, messages: bool = False) -> dict[str, Any]:
    """The applied skip's outcome, each id in every form a Pulsar user holds; with
    ``messages``, the messages skipped (a whole batch counts its messages)."""
    from cursorops.core.domain.acks.skip import SkipOutcome

    outcome = result.result
    assert isinstance(outcome, SkipOutcome)
    document = outcome.to_pulsar_json(_id_document)
    if messages:
        document["messages"] = sum(
            m.batch_size if m.batch_index < 0 and m.batch_size > 0 else 1 for m in outcome.skipped
        )
    return document


# -- skip by message ids ------------------------------------------------------------


_IDS_HELP = (
    "several values, repeatable; every form is read: L:E[:B], base64 MessageIdData, or what "
    "the Python client prints, (ledger,entry,partition,batch) such as (1,700,-1,-1)"
)


def _shape_skip(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The ids the command names (flags, or a file or stdin: one per line) as Pulsar's
    body: base64 ``MessageIdData``, each id read here first so that a bad one is named
    with its option."""
    from cursorops.core.domain.ids import skip_payload

    texts: list[str] = []
    option = "--message-id"
    for name, flag in (
        ("message_ids", "--message-id"),
        ("triplets", "--messageId-triplet"),
        ("base64_ids", "--messageId-base64"),
    ):
        if given.get(name):
            texts, option = list(given[name]), flag
    if given.get("file") is not None:
        texts, option = _read_ids(given["file"]), "--file"
    ids = [m.to_base64() for m in skip_payload.parse_ids(texts, option)]
    return None, {"topic": given["topic"], "subscription": given["subscription"], "ids": ids}


def _read_ids(path: str) -> list[str]:
    """The ids of a file (``-``: stdin), one per line; blank lines and ``#`` comments skipped."""
    import sys

    from cursorops.core.domain.errors import InvalidArgumentError

    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except (OSError, ValueError) as exc:  # ValueError: undecodable text, a NUL in the path
        raise InvalidArgumentError(f"Cannot read --file {path!r}: {exc}") from exc
    found = [line.strip() for line in text.splitlines()]
    ids = [line for line in found if line and not line.startswith("#")]
    if not ids:
        raise InvalidArgumentError(f"Invalid --file {path!r}: it holds no message id")
    return ids


@operation(
    "topics",
    "skip-messages",
    method="POST",
    path=SUBSCRIPTION_PATH + "/skipByMessageIds",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "message_ids",
            where="cli",
            kind=list,
            repeat=True,
            flags=("--message-id",),
            group="ids",
            metavar="ID",
            help="the ids to acknowledge: " + _IDS_HELP,
        ),
        Param(
            "triplets",
            where="cli",
            kind=list,
            repeat=True,
            flags=("--messageId-triplet",),
            group="ids",
            metavar="L:E[:B]",
            help="ledgerId:entryId[:batchIndex]; " + _IDS_HELP,
        ),
        Param(
            "base64_ids",
            where="cli",
            kind=list,
            repeat=True,
            flags=("--messageId-base64",),
            group="ids",
            metavar="B64",
            help="base64 MessageIdData (pulsar-client MessageId.serialize()); " + _IDS_HELP,
        ),
        Param(
            "file",
            where="cli",
            flags=("--file",),
            group="ids",
            metavar="PATH",
            help="read the ids from PATH ('-': stdin), one per line, any form",
        ),
        Param("ids", where="body", kind=object, whole_body=True, cli=False),
        Param("preview", kind=bool, default=False, cli=False),
    ),
    help="acknowledge chosen messages by id (PIP-423); Shared and Key_Shared only",
    status=204,
    gated=True,
    responses={
        **_GATED_RESPONSES,
        409: "Unsupported subscription type (Exclusive, Failover)",
        413: "Request body too large",
    },
    render=_skip_lines,
    shape=_shape_skip,
)
def skip_by_message_ids(
    call: Call, topic: str, subscription: str, ids: object, preview: bool
) -> Reply | Pending:
    """Acknowledge exactly the given messages of a Shared or Key_Shared subscription.

    The body is PIP-423's: a JSON array of base64 ``MessageIdData`` (or any id form
    cursorops reads), or ``{"type": "byteArray" | "messageId", "messageIds": [...]}``.
    Every id is checked first (all or nothing); the 204 carries the skip's id in
    ``X-Cursorops-Skip-Id``. Where the namespace requires approval, nothing is
    acknowledged: the skip is planned once and stored, its workflow started as the
    caller with the reason (``X-Cursorops-Reason`` or ``reason``, required there) and
    ticket, and the answer is 202 with the run.

    ``preview=true`` (cursorops extension): 200 with the plan the request would apply or
    send for approval (its counts, the exact backlog before and after per partition, the
    ids) and whether it waits for an approval; nothing is changed or stored.
    """
    from fastapi import HTTPException

    from cursorops.core.domain.ids.skip_payload import parse_payload
    from cursorops.core.services.gating import Pending, SkipMessages
    from cursorops.rest.limits import MAX_SKIP_IDS

    listed = ids.get("messageIds") if isinstance(ids, dict) else ids
    if isinstance(listed, list) and len(listed) > MAX_SKIP_IDS:
        raise HTTPException(
            413, f"Too many message ids: {len(listed)}; at most {MAX_SKIP_IDS} per call"
        )
    arguments = SkipMessages(
        topic=topic,
        subscription=subscription,
        ids=tuple(parse_payload(ids)),
        reason=call.reason,
        ticket=call.ticket,
    )
    if preview:
        planned = call.broker.preview_request("skip-messages", call.caller, arguments)
        return Reply(skip_preview(planned))
    with _skip_turns():
        result = _requested(call, "skip-messages", arguments)
    if isinstance(result, Pending):
        return result
    outcome = _skip_outcome(result)
    # Pulsar answers 204 with no body: the skip id (what undoSkip takes) is a header.
    return Reply(outcome, 204, {SKIP_ID_HEADER: str(outcome["skipId"])})


def skip_preview(preview: PlannedRequest) -> dict[str, Any]:
    """A skip's preview as JSON: what it would acknowledge, with no message content (the
    ids and counts only)."""
    plan = preview.planned.plan
    document = preview.planned.document
    return {
        "operation": "skip-messages",
        "topic": plan.topic,
        "subscription": plan.subscription,
        "approvalRequired": preview.approval_required,
        "planId": plan.plan_id,
        "ids": len(plan),
        "messages": plan.messages,
        "alreadyAcknowledged": document["alreadyAcknowledged"],
        "backlog": document["backlog"],
        "messageIds": [
            {
                "messageId": item.message_id.triplet(),
                "topicPartition": item.topic_partition,
                "partition": item.partition,
                "alreadyAcknowledged": item.already_acknowledged,
            }
            for item in plan.items
        ],
    }


# -- the head of the backlog --------------------------------------------------------


def _too_many(count: int) -> int:
    from cursorops.core.domain.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"Invalid number of messages {count}: expected at most {MAX_SKIP_HEAD}"
    )


def _skip_head(call: Call, arguments: GatedArguments) -> Reply | Pending:
    from cursorops.core.services.gating import ClearBacklog, Pending

    name = "clear-backlog" if isinstance(arguments, ClearBacklog) else "skip-head"
    with _skip_turns():
        result = _requested(call, name, arguments)
    if isinstance(result, Pending):
        return result
    return Reply(_skip_outcome(result, messages=True), 204)


@operation(
    "topics",
    "skip",
    method="POST",
    path=SUBSCRIPTION_PATH + "/skip/{numMessages}",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "count",
            where="path",
            kind=int,
            wire="numMessages",
            flags=("-n", "--count"),
            help="messages to skip",
        ),
    ),
    help="skip the first N messages of each partition (batches count their messages)",
    status=204,
    gated=True,
    responses=_GATED_RESPONSES,
    render=_head_lines,
)
def skip_messages_count(call: Call, topic: str, subscription: str, count: int) -> Reply | Pending:
    """Skip the first ``numMessages`` messages of each partition (a batch counts its
    messages, where Pulsar counts entries)."""
    from cursorops.core.services.gating import SkipHead

    arguments = SkipHead(
        topic=topic,
        subscription=subscription,
        messages=count if count <= MAX_SKIP_HEAD else _too_many(count),
        reason=call.reason,
        ticket=call.ticket,
    )
    return _skip_head(call, arguments)


@operation(
    "topics",
    "clear-backlog",
    method="POST",
    path=SUBSCRIPTION_PATH + "/skip_all",
    params=(TOPIC, SUBSCRIPTION),
    help="skip every message of the subscription's backlog, as it is now",
    status=204,
    gated=True,
    responses=_GATED_RESPONSES,
    render=_head_lines,
)
def skip_all_messages(call: Call, topic: str, subscription: str) -> Reply | Pending:
    """Clear the subscription's backlog: every message unacknowledged now."""
    from cursorops.core.services.gating import ClearBacklog

    arguments = ClearBacklog(
        topic=topic, subscription=subscription, reason=call.reason, ticket=call.ticket
    )
    return _skip_head(call, arguments)


# -- undo a skip ----------------------------------------------------------------------


def _undo_lines(answer: Mapping[str, Any], _: Mapping[str, Any]) -> list[str]:
    lines = [
        f"Undid skip {answer['skipId']} on subscription {answer['subscription']} of "
        f"{answer['topic']}: {len(answer['unacknowledged'])} message(s) unacknowledged again "
        f"(undo id {answer['undoId']})"
    ]
    lines += [f"  unacknowledged       {triplet}" for triplet in answer["unacknowledged"]]
    lines += [f"  not acknowledged     {triplet}" for triplet in answer["notAcknowledged"]]
    return lines


@operation(
    "topics",
    "undo-skip",
    method="POST",
    path=SUBSCRIPTION_PATH + "/undoSkip/{skipId}",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "skip_id",
            where="path",
            kind=int,
            wire="skipId",
            flags=("--skip-id",),
            help="the skip's id (audit skips)",
        ),
    ),
    help="unacknowledge exactly what a skip acknowledged (its id: skip-messages prints it, "
    "audit skips lists them); once per skip",
    gated=True,
    responses={
        **_GATED_RESPONSES,
        404: "Topic, subscription or skip not found",
        409: "The skip was undone already",
    },
    render=_undo_lines,
)
def undo_skip(call: Call, topic: str, subscription: str, skip_id: int) -> Any:
    """Unacknowledge exactly what skip ``skipId`` acknowledged (those still acknowledged),
    once; the answer lists them. Needs the permission the skip needed. Every message must
    still be on a retained ledger (400 otherwise, nothing undone). Where the namespace
    requires approval, the undo is stored as a plan record and the ``cursorops_undo_skip``
    workflow started as the caller (202)."""
    from cursorops.core.services.gating import Pending, UndoSkip

    arguments = UndoSkip(
        topic=topic,
        subscription=subscription,
        skip_id=skip_id,
        reason=call.reason,
        ticket=call.ticket,
    )
    result = _requested(call, "undo-skip", arguments)
    return result if isinstance(result, Pending) else dict(result.outcome)


# -- redrive -------------------------------------------------------------------------


def _shape_redrive(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``--predicate``'s JSON text as the object the body carries."""
    import json

    from cursorops.core.domain.errors import InvalidPredicateError

    sent = {k: v for k, v in given.items() if k != "predicate_text"}
    text = given.get("predicate_text")
    if text is not None:
        try:
            sent["predicate"] = json.loads(text)
        except ValueError as exc:
            raise InvalidPredicateError(f"Invalid predicate: not JSON: {exc}") from exc
    return None, sent


def _redrive_lines(answer: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    from cursorops.cli.output import format_time, theirs

    if values.get("preview"):
        ids = f", {answer['ids']} ids" if answer["ids"] != answer["messages"] else ""
        lines = [
            f"Would redrive {answer['messages']} message(s){ids} of {answer['deadLetterTopic']} "
            f"to subscription {theirs(answer['subscription'])} of {answer['topic']} "
            f"(plan {answer['planId']})"
        ]
        return lines + [
            f"  {m['messageId']:<12}  key={'-' if m['key'] is None else theirs(m['key'])}  "
            f"{format_time(m['publishTime'])}"
            for m in answer["firstMessages"]
        ]
    others = ", ".join(answer["acknowledgedOn"]) or "none"
    lines = [
        f"Redrove {answer['redriven']} message(s) of {answer['deadLetterTopic']} to "
        f"subscription {theirs(answer['subscription'])} of {answer['topic']} (redrive "
        f"{answer['redriveId']}, plan {answer['planId']})",
        f"  acknowledged on the other subscriptions: {others}",
    ]
    if answer["acknowledgedMeanwhile"]:
        lines.append(
            f"  acknowledged on the dead-letter topic meanwhile, not redriven: "
            f"{len(answer['acknowledgedMeanwhile'])}"
        )
    return lines


@operation(
    "topics",
    "redrive",
    method="POST",
    path=SUBSCRIPTION_PATH + "/redrive",
    params=(
        TOPIC,
        Param(
            "subscription",
            where="path",
            flags=("-s", "--subscription"),
            help="the subscription that dead-lettered them",
        ),
        Param(
            "dead_letter_topic",
            where="body",
            wire="deadLetterTopic",
            flags=("--dead-letter-topic",),
            metavar="TOPIC",
            default=None,
            limit=1024,
            help="the client's dead-letter topic when its policy named one "
            "(default TOPIC-SUBSCRIPTION-DLQ)",
        ),
        Param(
            "predicate_text",
            where="cli",
            flags=("--predicate",),
            metavar="JSON",
            default=None,
            help='only the messages matching it, e.g. \'{"key": "order-42"}\'',
        ),
        Param("predicate", where="body", kind=dict, default=None, cli=False),
        Param(
            "preview",
            where="body",
            kind=bool,
            flags=("--preview",),
            default=False,
            help="show what would be redriven, change nothing",
        ),
    ),
    help="publish a subscription's dead-lettered messages back to the topic, for it alone",
    gated=True,
    responses=_GATED_RESPONSES,
    render=_redrive_lines,
    shape=_shape_redrive,
    closed_body=True,
)
def redrive(
    call: Call,
    topic: str,
    subscription: str,
    dead_letter_topic: str | None,
    predicate: dict[str, Any] | None,
    preview: bool,
) -> Any:
    """Publish the subscription's dead-lettered messages (``<topic>-<subscription>-DLQ``, or
    ``deadLetterTopic``; those ``predicate`` matches) back to the topic, acknowledged on its
    other subscriptions and on the dead-letter topic's, in one transaction.

    ``preview``: the plan's counts and first messages, nothing changed. Otherwise the
    outcome: every redriven message's dead-letter id and new id, and the audit record's id;
    or, where either topic's namespace requires approval, 202 with the workflow's run.
    """
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.domain.ids.topic_name import TopicName
    from cursorops.core.services.gating import Pending, RedriveDeadLetters

    name = TopicName.parse(topic)
    if name.is_partition:
        raise InvalidArgumentError(
            f"Redrive publishes to the whole topic: use '{name.base}', not one partition"
        )
    arguments = RedriveDeadLetters(
        topic=str(name),
        subscription=subscription,
        dead_letter_topic=dead_letter_topic,
        predicate=predicate,
        reason=call.reason,
        ticket=call.ticket,
    )
    if preview:
        return call.broker.preview_request("redrive", call.caller, arguments).planned.plan.preview()
    result = _requested(call, "redrive", arguments)
    return result if isinstance(result, Pending) else dict(result.outcome)


# -- reset the cursor ------------------------------------------------------------------


_RESET_TO_ID = "topics reset-cursor message-id"


def _shape_reset(given: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """``--time`` as epoch milliseconds (a duration is before now, here), or
    ``--messageId`` as Pulsar's ``ResetCursorData`` (every id form, one whole entry)."""
    from cursorops.cli.output import format_time
    from cursorops.core.domain.durations import parse_time_ms
    from cursorops.core.domain.ids.message_id import parse_position
    from cursorops.core.domain.ids.topic_name import TopicName
    from cursorops.core.services.broker import wall_clock_ms

    target = {"topic": given["topic"], "subscription": given["subscription"]}
    if given.get("message_id") is not None:
        partition = TopicName.parse(given["topic"]).partition_index
        position = parse_position(given["message_id"], "--messageId", partition)
        fields = {"ledger_id": position.ledger_id, "entry_id": position.entry_id}
        return _RESET_TO_ID, {**target, **fields, "target": str(position)}
    timestamp = parse_time_ms(given["time"], "--time", wall_clock_ms())
    return None, {**target, "timestamp": timestamp, "target": format_time(timestamp)}


def _reset_lines(answer: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    lines = [
        f"Reset subscription {values['subscription']} to {values['target']}; "
        "mark-delete position now:"
    ]
    return lines + [f"  {partition}: {at}" for partition, at in answer["markDelete"].items()]


def _reset_document(answer: Mapping[str, Any], values: Mapping[str, Any]) -> object:
    return {
        "subscription": values["subscription"],
        "target": values["target"],
        "markDeletePosition": dict(answer["markDelete"]),
    }


def _reset(call: Call, topic: str, subscription: str, **target: Any) -> Reply | Pending:
    from cursorops.core.services.gating import Pending, ResetCursor

    arguments = ResetCursor(
        topic=topic, subscription=subscription, reason=call.reason, ticket=call.ticket, **target
    )
    result = _requested(call, "reset-cursor", arguments)
    return result if isinstance(result, Pending) else Reply(dict(result.outcome), 204)


@operation(
    "topics",
    "reset-cursor",
    method="POST",
    path=SUBSCRIPTION_PATH + "/resetcursor/{timestamp}",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param(
            "message_id",
            where="cli",
            flags=("-m", "--messageId"),
            group="target",
            metavar="ID",
            help="ledgerId:entryId, or any message id form of skip-messages --message-id naming "
            "a whole entry (non-partitioned topics, or one partition)",
        ),
        Param(
            "time",
            where="cli",
            flags=("-t", "--time"),
            group="target",
            metavar="TIME",
            help="relative (10m, 3h, 2d, 1w: that long ago), epoch ms, or ISO-8601 (UTC if no "
            "offset)",
        ),
        Param("timestamp", where="path", kind=int, cli=False),
    ),
    help="move a subscription's cursor",
    status=204,
    gated=True,
    responses=_GATED_RESPONSES,
    render=_reset_lines,
    document=_reset_document,
    shape=_shape_reset,
)
def reset_cursor(call: Call, topic: str, subscription: str, timestamp: int) -> Reply | Pending:
    """Each partition's next message becomes its first published at or after ``timestamp``
    (epoch ms). Where the namespace requires approval, the reset is stored as a plan record
    and the ``cursorops_reset_cursor`` workflow started as the caller (202), with the
    reason."""
    return _reset(
        call, topic, subscription, timestamp_ms=in_range(timestamp, "timestamp", 0, INT64_MAX)
    )


@operation(
    *_RESET_TO_ID.split(),
    method="POST",
    path=SUBSCRIPTION_PATH + "/resetcursor",
    params=(
        TOPIC,
        SUBSCRIPTION,
        Param("ledger_id", where="body", kind=int, wire="ledgerId"),
        Param("entry_id", where="body", kind=int, wire="entryId"),
        Param("partition_index", where="body", kind=int, wire="partitionIndex", default=-1),
        Param("batch_index", where="body", kind=int, wire="batchIndex", default=-1),
        Param("is_excluded", where="body", kind=bool, wire="isExcluded", default=False),
        Param("excluded", where="body", kind=bool, default=False),
        Param("properties", where="body", kind=dict, default=None),
    ),
    help="move a subscription's cursor to a message id",
    status=204,
    gated=True,
    responses=_GATED_RESPONSES,
    cli=False,
    closed_body=True,
)
def reset_cursor_on_position(
    call: Call,
    topic: str,
    subscription: str,
    ledger_id: int,
    entry_id: int,
    partition_index: int,
    batch_index: int,
    is_excluded: bool,
    excluded: bool,
    properties: dict[str, Any] | None,
) -> Reply | Pending:
    """Pulsar's ``ResetCursorData`` (``MessageIdImpl``'s fields): the subscription's next
    message becomes the entry ``ledgerId:entryId`` of a non-partitioned topic or of the
    partition the path names. Refused (400): a batch index (a position is a whole entry),
    ``isExcluded`` and cursor properties (not supported), a partition other than the
    path's. Where the namespace requires approval, the reset is stored as a plan record
    and the ``cursorops_reset_cursor`` workflow started as the caller (202)."""
    from cursorops.core.domain.errors import InvalidArgumentError
    from cursorops.core.domain.ids.position import Position
    from cursorops.core.domain.ids.topic_name import TopicName

    in_range(ledger_id, "ledgerId", 0, INT64_MAX)
    in_range(entry_id, "entryId", 0, INT64_MAX)
    own = TopicName.parse(topic).partition_index
    if partition_index not in (-1, own):
        where = "a topic given by its name" if own < 0 else f"partition {own}"
        raise InvalidArgumentError(
            f"Invalid partitionIndex {partition_index}: the path names {where}"
        )
    if batch_index != -1:
        raise InvalidArgumentError(
            f"Invalid batchIndex {batch_index}: a position is a whole entry (give -1)"
        )
    if is_excluded or excluded:
        raise InvalidArgumentError("isExcluded is not supported: the reset includes the entry")
    if properties:
        raise InvalidArgumentError("Cursor properties are not supported on a reset")
    return _reset(call, topic, subscription, position=Position(ledger_id, entry_id))
