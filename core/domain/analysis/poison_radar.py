"""The poison-pill radar: a subscription's messages stuck at the head of its backlog.

Pure: arrays in, findings out; no store, no clock. A message is *stuck* when it
is unacknowledged, due, and either

- **redelivered**: consumers asked for it again at least ``min_redeliveries``
  times (negative acknowledgements, ack timeouts, redeliver requests). The
  count is the dispatcher's, persisted with the pending message in the
  metadata store (:mod:`cursorops.core.store.pending_runs`), the number a consumer
  receives; consumers that closed, died or lost their broker do not raise it
  (:mod:`cursorops.core.domain.delivery.redelivery`), so consumer churn is no evidence. A
  message nobody received yet counts 0. Or
- **behind acknowledgements**: a consumer acknowledged a later message of its
  partition (consumers have moved past it) and it has been deliverable for at
  least ``min_age_s`` (its *age*: now - its publish time, or its deliver-at
  time when later). Only consumers' acknowledgements count: the cursor's
  consumer-ack mark, the highest message a consumer acknowledged, which the
  dispatcher raises with each acknowledgement and nothing else does (a skip,
  clear-backlog, undo or a redrive's acknowledgements leave it; a reset clears
  it). Those acknowledge what an operator chose, not what consumers got past;
  counted, every old message before a skipped one was listed. No mark known (a
  cursor no consumer acknowledged on since it was created, reset or migrated):
  nothing is behind.

A delayed message not yet due (its deliver-at time after now, on a subscription
type that holds delayed messages back) is never stuck: nobody could have
received it, and later messages are rightly acknowledged before it.

A chunked message is one message (:mod:`cursorops.core.domain.ids.chunked_messages`): found,
counted and listed once, at its last chunk, where the backlog counts it and a
consumer receives it (a skip of that id takes every chunk).

The thresholds document (:mod:`cursorops.core.domain.analysis.backlog_audit`) carries the limits
as one ``radar`` object; every field is optional::

    "radar": {"minRedeliveries": 3, "minAgeSeconds": 600, "maxListed": 50}

Defaults (:class:`RadarLimits`): 3 redeliveries (a handler that failed three
times is unlikely to succeed on the fourth, and Pulsar's dead-letter policies
are commonly set to a few), 600 s (longer than any sane processing or
ack-timeout window, shorter than an hourly audit), 50 listed per subscription
(enough to read, small enough for one skip request). ``null`` switches that
criterion off; both off switches the radar off.

The findings listed are the ``max_listed`` first by redelivery count
(highest first), then topic partition, then position: the most redelivered
first, the head of each partition next. The counts cover every stuck message.
Cost per partition: O(n log n) numpy work for n entries, plus the pending
messages; no Python step per message.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position_match import match_positions

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

MAX_LISTED = 1000
"""Upper bound of ``maxListed``: the listed ids travel in one skip request."""

SKIP_DAG = "cursorops_skip_messages"

_KEYS = {
    "minRedeliveries": ("min_redeliveries", 1),
    "minAgeSeconds": ("min_age_s", 0),
    "maxListed": ("max_listed", 0),
}
"""Document key -> (field, smallest value)."""


@dataclass(frozen=True)
class RadarLimits:
    """When a message counts as stuck, and how many findings are listed.

    ``min_redeliveries`` and ``min_age_s`` are inclusive (at least); None
    switches that criterion off.
    """

    min_redeliveries: int | None = 3
    min_age_s: int | None = 600
    max_listed: int = 50

    @property
    def enabled(self) -> bool:
        return self.min_redeliveries is not None or self.min_age_s is not None

    @classmethod
    def from_json(cls, document: object, where: str = "radar") -> RadarLimits:
        """Parse the ``radar`` object; absent fields keep their defaults, null is off."""
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise InvalidArgumentError(f"Invalid thresholds: {where} must be an object")
        unknown = sorted(set(map(str, document)) - set(_KEYS))
        if unknown:
            raise InvalidArgumentError(
                f"Invalid thresholds: {where}: unknown {', '.join(unknown)} "
                f"(known: {', '.join(_KEYS)})"
            )
        values: dict[str, int | None] = cls().to_fields()
        for key, (name, low) in _KEYS.items():
            if key not in document:
                continue
            value = document[key]
            if value is None and key != "maxListed":
                values[name] = None
                continue
            high = MAX_LISTED if key == "maxListed" else None
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < low
                or (high is not None and value > high)
            ):
                bound = f"from {low} to {high}" if high is not None else f">= {low}"
                off = "" if key == "maxListed" else " or null (off)"
                raise InvalidArgumentError(
                    f"Invalid thresholds: {where}.{key} must be an integer {bound}{off}, "
                    f"got {value!r}"
                )
            values[name] = value
        listed = values["max_listed"]
        assert listed is not None
        return cls(values["min_redeliveries"], values["min_age_s"], listed)

    def to_fields(self) -> dict[str, int | None]:
        return {
            "min_redeliveries": self.min_redeliveries,
            "min_age_s": self.min_age_s,
            "max_listed": self.max_listed,
        }

    def to_json(self) -> dict[str, int | None]:
        return {
            "minRedeliveries": self.min_redeliveries,
            "minAgeSeconds": self.min_age_s,
            "maxListed": self.max_listed,
        }


@dataclass(frozen=True)
class PendingCounts:
    """A subscription's pending messages of one partition and their redelivery counts."""

    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    redelivery_count: Ints

    @classmethod
    def empty(cls) -> PendingCounts:
        none = np.zeros(0, np.int64)
        return cls(none, none, none, none)


@dataclass(frozen=True)
class StuckMessage:
    """One finding. ``topic_partition``, ``partition`` and ``key`` are filled by the caller."""

    ledger_id: int
    entry_id: int
    batch_index: int
    """-1 for a message that is not batched."""
    redelivery_count: int
    publish_ms: int
    age_ms: int
    """How long it has been deliverable: since its publish time, or its deliver-at time when
    later."""
    redelivered: bool
    """It met the redelivery criterion."""
    behind_acks: bool
    """It met the age criterion: old, with a later message of its partition acknowledged by
    a consumer."""
    topic_partition: str = ""
    partition: int = -1
    key: str | None = None

    @property
    def triplet(self) -> str:
        """pulsar-admin's ``ledgerId:entryId[:batchIndex]``."""
        head = f"{self.ledger_id}:{self.entry_id}"
        return head if self.batch_index < 0 else f"{head}:{self.batch_index}"

    def sort_key(self) -> tuple[int, str, int, int, int]:
        return (
            -self.redelivery_count,
            self.topic_partition,
            self.ledger_id,
            self.entry_id,
            self.batch_index,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "messageId": self.triplet,
            "topicPartition": self.topic_partition,
            "partition": self.partition,
            "key": self.key,
            "redeliveryCount": self.redelivery_count,
            "publishMs": self.publish_ms,
            "ageSeconds": self.age_ms // 1000,
            "redelivered": self.redelivered,
            "behindAcks": self.behind_acks,
        }


@dataclass(frozen=True)
class RadarResult:
    """Stuck messages of one partition, or of a subscription (:func:`merge`)."""

    stuck: int
    """Messages meeting either criterion."""
    redelivered: int
    behind_acks: int
    listed: tuple[StuckMessage, ...]

    @classmethod
    def empty(cls) -> RadarResult:
        return cls(0, 0, 0, ())

    def placed(self, topic_partition: str, partition: int) -> RadarResult:
        """This partition's result with its listed messages named by the partition."""
        listed = tuple(
            replace(m, topic_partition=topic_partition, partition=partition) for m in self.listed
        )
        return replace(self, listed=listed)


@dataclass(frozen=True)
class SubscriptionRadar:
    """One subscription's stuck messages over every partition of its topic, at ``at_ms``."""

    topic: str
    subscription: str
    subscription_type: str
    at_ms: int
    limits: RadarLimits
    result: RadarResult
    approval_required: bool = False
    """The topic's namespace requires approval of a skip: the request waits for one."""

    @property
    def skippable(self) -> bool:
        """Skip by id is Shared and Key_Shared only (PIP-423)."""
        return self.subscription_type in ("Shared", "Key_Shared")

    def to_json(self) -> dict[str, object]:
        """The findings, and a prefilled skip request of all listed when the type allows one."""
        listed = self.result.listed
        request = (
            skip_request(
                self.topic,
                self.subscription,
                listed,
                suggested_reason(listed, self.limits),
            )
            if listed and self.skippable
            else None
        )
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "type": self.subscription_type,
            "atMs": self.at_ms,
            "limits": self.limits.to_json(),
            "stuck": self.result.stuck,
            "redelivered": self.result.redelivered,
            "behindAcks": self.result.behind_acks,
            "listed": [m.to_json() for m in listed],
            "skipRequest": request,
            "approvalRequired": self.approval_required,
        }

    def lines(self) -> list[str]:
        """For people: a summary line, then one line per finding."""
        r = self.result
        head = (
            f"{self.topic} / {self.subscription}: {r.stuck} stuck message(s) "
            f"({r.redelivered} redelivered >= {self.limits.min_redeliveries}, {r.behind_acks} "
            f"behind acknowledgements for >= {self.limits.min_age_s} s)"
        )
        return [head] + [
            f"  {m.triplet}  partition {m.partition}  key {m.key if m.key is not None else '-'}"
            f"  redelivered {m.redelivery_count}x  age {m.age_ms // 1000} s"
            for m in r.listed
        ]


def scan_partition(
    state: CursorState,
    ledger_ids: npt.ArrayLike,
    entry_ids: npt.ArrayLike,
    batch_sizes: npt.ArrayLike,
    publish_ms: npt.ArrayLike,
    pending: PendingCounts,
    now_ms: int,
    limits: RadarLimits,
    chunk_rest: npt.ArrayLike | None = None,
    *,
    consumer_ack: tuple[int, int, int] | None,
    deliver_at: npt.ArrayLike | None = None,
) -> RadarResult:
    """The stuck messages of one partition for one subscription's cursor ``state``.

    ``ledger_ids``, ``entry_ids``, ``batch_sizes`` and ``publish_ms`` describe
    the partition's stored entries, aligned, in any order (``batch_size`` 0: not
    batched, one message with batch index -1). ``pending`` are the
    subscription's pending messages of the partition; those acknowledged since
    or not stored are ignored. ``chunk_rest`` (aligned; the entry index's,
    :func:`cursorops.core.domain.ids.chunked_messages.chunk_rest`): the chunks before a chunked
    message's last. The message is found, counted and listed once, at its last
    chunk, as the backlog counts it; the chunks before it are no finding.
    ``consumer_ack``: the highest message (ledger, entry, batch index) a consumer
    acknowledged on the partition (the cursor's consumer-ack mark), None when none is
    known: then no message is behind acknowledgements. ``deliver_at`` (aligned; epoch ms,
    -1 for an entry that is not delayed; None: the subscription type delivers delayed
    messages at once): an entry not yet due is no finding, and one due is aged from then.
    """
    ledger = np.asarray(ledger_ids, np.int64)
    entry = np.asarray(entry_ids, np.int64)
    order = np.lexsort((entry, ledger))
    ledger, entry = ledger[order], entry[order]
    size = np.asarray(batch_sizes, np.int64)[order]
    publish = np.asarray(publish_ms, np.int64)[order]
    deliver = (
        np.asarray(deliver_at, np.int64)[order]
        if deliver_at is not None
        else np.full_like(publish, -1)
    )
    due = np.maximum(publish, deliver)
    n = len(ledger)
    if n == 0 or not limits.enabled:
        return RadarResult.empty()
    rest = (
        np.asarray(chunk_rest, np.bool_)[order] if chunk_rest is not None else np.zeros(n, np.bool_)
    )
    # Which rows are acknowledged reads every chunk; what counts is each message once.
    stored = backlog.unacked_messages(state, ledger, entry, size)
    unacked = np.where(rest, 0, stored)
    waiting = deliver > now_ms
    old = (
        ((now_ms - due) >= limits.min_age_s * 1000) & ~waiting
        if limits.min_age_s is not None
        else np.zeros(n, np.bool_)
    )
    # Behind the consumers' last acknowledgement: every row before its entry, and in the
    # row of its entry (``last``, when stored) the indexes below its batch index ``cut``.
    if consumer_ack is None:
        before = np.zeros(n, np.bool_)
        last, cut = -1, -1
    else:
        mark_ledger, mark_entry, cut = (int(v) for v in consumer_ack)
        before = (ledger < mark_ledger) | ((ledger == mark_ledger) & (entry < mark_entry))
        at = int(before.sum())
        stored_mark = at < n and ledger[at] == mark_ledger and entry[at] == mark_entry
        last = at if stored_mark else -1
    behind_rows = before & (unacked > 0) & old

    # Pending messages still unacknowledged, at their row.
    p_row = match_positions(pending.ledger_id, pending.entry_id, ledger, entry)
    p_index = np.asarray(pending.batch_index, np.int64)
    p_size = size[np.maximum(p_row, 0)] if n else np.zeros(len(p_row), np.int64)
    live = (p_row >= 0) & np.where(p_size > 0, (p_index >= 0) & (p_index < p_size), p_index == -1)
    live &= ~rest[np.maximum(p_row, 0)]
    if live.any():
        live[live] = ~state.acked_many(
            pending.ledger_id[live], pending.entry_id[live], p_index[live]
        )
    p_row, p_index = p_row[live], p_index[live]
    p_count = np.asarray(pending.redelivery_count, np.int64)[live]
    p_behind = old[p_row] & (before[p_row] | ((p_row == last) & (p_index < cut)))
    p_red = (
        (p_count >= limits.min_redeliveries) & ~waiting[p_row]
        if limits.min_redeliveries is not None
        else np.zeros(len(p_row), np.bool_)
    )

    # Every message behind the last acknowledged one: whole rows, and row ``last``'s part.
    partial = _messages(state, ledger, entry, size, np.array([last] if last >= 0 else [], np.int64))
    partial_behind = (partial[1] < cut) & (old[last] if last >= 0 else False)
    behind = int(unacked[behind_rows].sum()) + int(partial_behind.sum())
    redelivered = int(p_red.sum())
    stuck = redelivered + behind - int((p_red & p_behind).sum())

    # Listed: the pending findings, and the head of the behind messages nobody holds.
    found = p_red | p_behind
    width = int(max(int(size.max()), 1)) + 1
    pending_keys = np.sort(p_row * width + p_index + 1)
    # The first max_listed behind messages by position cover every zero-count finding listed
    # (pending ones among them are in ``found`` already).
    head = np.flatnonzero(behind_rows)
    head = head[np.cumsum(unacked[head]) - unacked[head] < limits.max_listed]
    h_row, h_index = _messages(state, ledger, entry, size, head)
    h_row = np.concatenate([h_row, partial[0][partial_behind]])
    h_index = np.concatenate([h_index, partial[1][partial_behind]])
    keys = h_row * width + h_index + 1
    fresh = ~_among(keys, pending_keys)
    rows_out = np.concatenate([p_row[found], h_row[fresh]])
    index_out = np.concatenate([p_index[found], h_index[fresh]])
    count_out = np.concatenate([p_count[found], np.zeros(int(fresh.sum()), np.int64)])
    red_out = np.concatenate([p_red[found], np.zeros(int(fresh.sum()), np.bool_)])
    behind_out = np.concatenate([p_behind[found], np.ones(int(fresh.sum()), np.bool_)])
    chosen = np.lexsort((index_out, rows_out, -count_out))[: limits.max_listed]
    listed = tuple(
        StuckMessage(
            ledger_id=int(ledger[r]),
            entry_id=int(entry[r]),
            batch_index=int(i),
            redelivery_count=int(c),
            publish_ms=int(publish[r]),
            age_ms=max(0, now_ms - int(due[r])),
            redelivered=bool(red),
            behind_acks=bool(b),
        )
        for r, i, c, red, b in zip(
            rows_out[chosen].tolist(),
            index_out[chosen].tolist(),
            count_out[chosen].tolist(),
            red_out[chosen].tolist(),
            behind_out[chosen].tolist(),
            strict=True,
        )
    )
    return RadarResult(stuck, redelivered, behind, listed)


def _messages(
    state: CursorState, ledger: Ints, entry: Ints, size: Ints, rows: npt.ArrayLike
) -> tuple[Ints, Ints]:
    """(row, batch index) of every unacknowledged message of ``rows``, in position order."""
    rows = np.asarray(rows, np.int64)
    counts = np.maximum(size[rows], 1)
    row = np.repeat(rows, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    index = np.arange(len(row), dtype=np.int64) - starts
    index = np.where(size[row] == 0, -1, index)
    if not len(row):
        return row, index
    live = ~state.acked_many(ledger[row], entry[row], index)
    return row[live], index[live]


def _among(keys: Ints, sorted_keys: Ints) -> Flags:
    if not len(sorted_keys):
        return np.zeros(len(keys), np.bool_)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return np.asarray(sorted_keys[at] == keys, np.bool_)


def merge(parts: Sequence[RadarResult], max_listed: int) -> RadarResult:
    """One subscription's result from its partitions' (each listed part already tagged)."""
    listed = sorted((m for p in parts for m in p.listed), key=StuckMessage.sort_key)
    return RadarResult(
        sum(p.stuck for p in parts),
        sum(p.redelivered for p in parts),
        sum(p.behind_acks for p in parts),
        tuple(listed[:max_listed]),
    )


def suggested_reason(messages: Sequence[StuckMessage], limits: RadarLimits) -> str:
    """The reason a skip request of these findings proposes (the requester may edit it)."""
    most = max((m.redelivery_count for m in messages), default=0)
    oldest = max((m.age_ms for m in messages), default=0) // 1000
    return (
        f"poison-pill radar: {len(messages)} message(s) stuck at the head "
        f"(up to {most} redeliveries, oldest {oldest} s; limits {limits.to_json()})"
    )


def skip_request(
    topic: str,
    subscription: str,
    messages: Sequence[StuckMessage],
    reason: str,
) -> dict[str, Any]:
    """A prefilled skip request of these findings (``skip-messages``), in two equal forms,
    each a door that makes the request in one call: applied at once, or, on a namespace
    that requires approval, stored and its :data:`SKIP_DAG` run started.

    ``conf`` is the request (topic, subscription, the ids as triplets, the reason);
    ``command`` the ``cursorops topics skip-messages`` line (with ``--admin-url`` to a
    deployment, as its user); ``rest`` the ``skipByMessageIds`` call, its reason in the
    ``X-Cursorops-Reason`` header.
    """
    from cursorops.core.domain.ids.topic_name import TopicName

    conf = {
        "topic": topic,
        "subscription": subscription,
        "message_ids": [m.triplet for m in messages],
        "reason": reason,
    }
    name = TopicName.parse(topic)
    path = (
        f"/admin/v2/persistent/{quote(name.tenant, safe='')}/{quote(name.namespace, safe='')}"
        f"/{quote(name.local_name, safe='')}/subscription/{quote(subscription, safe='')}"
        "/skipByMessageIds"
    )
    ids = [
        {"ledgerId": m.ledger_id, "entryId": m.entry_id}
        | ({"batchIndex": m.batch_index} if m.batch_index >= 0 else {})
        for m in messages
    ]
    command = [
        "cursorops",
        "topics",
        "skip-messages",
        topic,
        "-s",
        subscription,
        "--messageId-triplet",
        *conf["message_ids"],
        "--reason",
        reason,
    ]
    return {
        "operation": "skip-messages",
        "conf": conf,
        "command": shlex.join(command),
        "rest": {
            "method": "POST",
            "path": path,
            "headers": {"X-Cursorops-Reason": reason},
            "body": {"type": "messageId", "messageIds": ids},
        },
    }


__all__ = [
    "MAX_LISTED",
    "SKIP_DAG",
    "PendingCounts",
    "RadarLimits",
    "RadarResult",
    "StuckMessage",
    "SubscriptionRadar",
    "merge",
    "scan_partition",
    "skip_request",
    "suggested_reason",
]
