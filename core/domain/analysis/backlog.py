"""Exact backlog: entries and messages a subscription has not acknowledged.

Pulsar's ``msgBacklog`` counts entries and its analyze-backlog (PIP-187) counts
a partly acknowledged batch as whole. Here a batch entry counts only its
unacknowledged indexes, and nothing is capped.

Everything works on an *entry index*: aligned arrays with one row per
committed entry of a partition, sorted by ``(ledger_id, entry_id)``, dense
(entries ``0..n-1`` of every ledger). :func:`unacked_messages` is the one
decision function; the Spark jobs call it on their slices too, so a Spark
answer and a core answer cannot differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.analysis.filter_verdict import FilterVerdict
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.position_match import match_positions


def unacked_messages(
    state: CursorState,
    ledger_ids: np.ndarray,
    entry_ids: np.ndarray,
    batch_sizes: np.ndarray,
    chunk_rest: np.ndarray | None = None,
) -> np.ndarray:
    """Unacknowledged messages per entry (int64 array aligned with the inputs).

    0 for an acknowledged entry; ``max(batch_size, 1)`` for an untouched one; the
    number of set bits of its ack set for a partly acknowledged batch. ``chunk_rest``
    (aligned): the chunks before a chunked message's last, which count 0: the
    message counts once, at its last chunk. The input
    rows may be any subset of a partition's entries, in any order. Cost: O(n log n)
    for n rows, plus the size of the individually deleted set restricted to them.
    """
    ledger_ids = np.asarray(ledger_ids, dtype=np.int64)
    entry_ids = np.asarray(entry_ids, dtype=np.int64)
    counts = np.maximum(np.asarray(batch_sizes, dtype=np.int64), 1)
    if chunk_rest is not None:
        counts[chunk_rest] = 0
    md_ledger, md_entry = state.mark_delete
    live = (ledger_ids > md_ledger) | ((ledger_ids == md_ledger) & (entry_ids > md_entry))
    deleted = state.individually_deleted
    if len(deleted) and live.any():
        present = set(np.unique(ledger_ids[live]).tolist())
        acked = [
            (ledger_id, np.asarray(deleted.bitmap(ledger_id).to_array(), dtype=np.int64))
            for ledger_id in deleted.ledgers()
            if ledger_id in present
        ]
        if acked:
            acked_ledgers = np.concatenate([np.full(e.size, lid, np.int64) for lid, e in acked])
            acked_entries = np.concatenate([e for _, e in acked])
            live &= match_positions(ledger_ids, entry_ids, acked_ledgers, acked_entries) < 0
    counts = np.where(live, counts, 0)
    if state.batch_acks and live.any():
        _apply_batch_acks(state, ledger_ids, entry_ids, live, counts)
    return counts


def _apply_batch_acks(
    state: CursorState,
    ledger_ids: np.ndarray,
    entry_ids: np.ndarray,
    live: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Count only the unacknowledged indexes of partly acknowledged batches (every row)."""
    positions = list(state.batch_acks)
    which = match_positions(
        ledger_ids,
        entry_ids,
        np.fromiter((p.ledger_id for p in positions), dtype=np.int64, count=len(positions)),
        np.fromiter((p.entry_id for p in positions), dtype=np.int64, count=len(positions)),
    )
    for row in np.flatnonzero(live & (which >= 0)).tolist():
        counts[row] = ack_set.unacked_count(state.batch_acks[positions[which[row]]])


@dataclass(frozen=True)
class Backlog:
    entries: int
    messages: int


def backlog(
    state: CursorState,
    ledger_ids: np.ndarray,
    entry_ids: np.ndarray,
    batch_sizes: np.ndarray,
    chunk_rest: np.ndarray | None = None,
) -> Backlog:
    """Exact backlog of one cursor over the given entries (a chunked message counted once)."""
    counts = unacked_messages(state, ledger_ids, entry_ids, batch_sizes, chunk_rest)
    return Backlog(entries=int(np.count_nonzero(counts)), messages=int(counts.sum()))


COUNT_FIELDS = (
    "entries",
    "messages",
    "filter_accepted_entries",
    "filter_rejected_entries",
    "filter_rescheduled_entries",
    "filter_accepted_messages",
    "filter_rejected_messages",
    "filter_rescheduled_messages",
    "marker_messages",
)
"""The counters of a :class:`BacklogAnalysis`, which add up across partitions."""

ID_FIELDS = ("first_message_id", "last_message_id", "resume_after")
"""The ``"ledger:entry"`` fields of a :class:`BacklogAnalysis`."""


@dataclass(frozen=True)
class BacklogAnalysis:
    """PIP-187's ``AnalyzeSubscriptionBacklogResult``, exact to the message.

    ``first_message_id`` / ``last_message_id`` are ``"ledger:entry"`` of the first
    and last backlog entry. ``aborted`` is true only when a caller-given limit
    stopped the scan; ``resume_after`` then names the last entry scanned.
    """

    entries: int = 0
    messages: int = 0
    filter_accepted_entries: int = 0
    filter_rejected_entries: int = 0
    filter_rescheduled_entries: int = 0
    filter_accepted_messages: int = 0
    filter_rejected_messages: int = 0
    filter_rescheduled_messages: int = 0
    marker_messages: int = 0
    aborted: bool = False
    first_message_id: str | None = None
    last_message_id: str | None = None
    resume_after: str | None = None

    def to_pulsar_json(self) -> dict[str, object]:
        """Field names as Pulsar's REST API and pulsar-admin print them."""
        out: dict[str, object] = {}
        for name, value in asdict(self).items():
            head, *rest = name.split("_")
            camel = head + "".join(part.title() for part in rest)
            out[camel] = value
        return out

    def plus(self, other: BacklogAnalysis) -> BacklogAnalysis:
        """This total with another partition's or subscription's result folded in."""
        counts = {name: getattr(self, name) + getattr(other, name) for name in COUNT_FIELDS}
        return replace(
            self,
            **counts,
            aborted=self.aborted or other.aborted,
            first_message_id=(
                self.first_message_id
                if self.first_message_id is not None
                else other.first_message_id
            ),
            last_message_id=(
                other.last_message_id if other.last_message_id is not None else self.last_message_id
            ),
        )


@dataclass(frozen=True)
class PartitionAnalysis:
    """One subscription's analysis on one topic partition."""

    topic_partition: str
    subscription: str
    result: BacklogAnalysis

    def to_pulsar_json(self) -> dict[str, object]:
        return {
            "topicPartition": self.topic_partition,
            "subscription": self.subscription,
            **self.result.to_pulsar_json(),
        }


@dataclass(frozen=True)
class TopicAnalysis:
    """A topic's analysis: per partition and subscription, a total per subscription, a total.

    Totals over several partitions have no first or last message id: entries
    of different partitions have no common order.
    """

    topic: str
    subscription: str | None
    """The one subscription analysed, or None for all."""
    partitions: tuple[PartitionAnalysis, ...]
    subscriptions: Mapping[str, BacklogAnalysis] = field(default_factory=dict)
    """Each subscription's total over the partitions, in first-seen order."""
    total: BacklogAnalysis = BacklogAnalysis()

    @classmethod
    def of(
        cls, topic: str, subscription: str | None, analyses: Sequence[PartitionAnalysis]
    ) -> TopicAnalysis:
        per_sub: dict[str, BacklogAnalysis] = {}
        total = BacklogAnalysis()
        for one in analyses:
            per_sub[one.subscription] = per_sub.get(one.subscription, BacklogAnalysis()).plus(
                one.result
            )
            total = total.plus(one.result)
        if len({one.topic_partition for one in analyses}) > 1:
            per_sub = {
                name: replace(value, first_message_id=None, last_message_id=None)
                for name, value in per_sub.items()
            }
            total = replace(total, first_message_id=None, last_message_id=None)
        return cls(topic, subscription, tuple(analyses), per_sub, total)

    def to_pulsar_json(self) -> dict[str, object]:
        """What ``cursorops topics analyze-backlog -o json`` prints, whichever engine counted."""
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "partitions": [one.to_pulsar_json() for one in self.partitions],
            "subscriptions": {
                name: value.to_pulsar_json() for name, value in self.subscriptions.items()
            },
            "total": self.total.to_pulsar_json(),
        }


def analysis_document(
    topic: str, subscription: str | None, analyses: Sequence[PartitionAnalysis]
) -> dict[str, object]:
    """:meth:`TopicAnalysis.to_pulsar_json` of these analyses."""
    return TopicAnalysis.of(topic, subscription, analyses).to_pulsar_json()


def analyze(
    state: CursorState,
    ledger_ids: np.ndarray,
    entry_ids: np.ndarray,
    batch_sizes: np.ndarray,
    verdicts: np.ndarray | None = None,
    *,
    start_after: Position | None = None,
    max_entries: int | None = None,
    chunk_rest: np.ndarray | None = None,
) -> BacklogAnalysis:
    """PIP-187 analysis of one cursor over a partition's entry index (sorted); a chunked
    message counts once (``chunk_rest``, as :func:`unacked_messages`).

    ``verdicts`` (per entry: ACCEPT, REJECT, RESCHEDULE) come from the
    subscription's entry filters; None means no filter, i.e. all accepted.
    ``start_after`` resumes an earlier aborted scan; ``max_entries`` caps the
    number of backlog entries examined (no cap by default), setting ``aborted``.
    """
    ledger_ids = np.asarray(ledger_ids, dtype=np.int64)
    entry_ids = np.asarray(entry_ids, dtype=np.int64)
    counts = unacked_messages(state, ledger_ids, entry_ids, batch_sizes, chunk_rest)
    rows = np.flatnonzero(counts)
    if start_after is not None:
        after = (ledger_ids[rows] > start_after.ledger_id) | (
            (ledger_ids[rows] == start_after.ledger_id) & (entry_ids[rows] > start_after.entry_id)
        )
        rows = rows[after]
    aborted = max_entries is not None and rows.size > max_entries
    if aborted:
        rows = rows[:max_entries]
    if rows.size == 0:
        return BacklogAnalysis(aborted=aborted)
    picked = counts[rows]
    kinds = np.zeros(rows.size, dtype=np.int8) if verdicts is None else np.asarray(verdicts)[rows]
    entries, messages = [], []
    for verdict in FilterVerdict:
        chosen = kinds == verdict
        entries.append(int(np.count_nonzero(chosen)))
        messages.append(int(picked[chosen].sum()))
    first, last = rows[0], rows[-1]
    last_id = f"{ledger_ids[last]}:{entry_ids[last]}"
    return BacklogAnalysis(
        entries=int(rows.size),
        messages=int(picked.sum()),
        aborted=aborted,
        first_message_id=f"{ledger_ids[first]}:{entry_ids[first]}",
        last_message_id=last_id,
        resume_after=last_id if aborted else None,
        filter_accepted_entries=entries[0],
        filter_rejected_entries=entries[1],
        filter_rescheduled_entries=entries[2],
        filter_accepted_messages=messages[0],
        filter_rejected_messages=messages[1],
        filter_rescheduled_messages=messages[2],
    )
