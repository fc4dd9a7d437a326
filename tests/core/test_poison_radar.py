"""The poison-pill radar held to a plain model: Python sets of acknowledged messages, and the
consumers' last acknowledgement as one (ledger, entry, batch index)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks import ack_set
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.acks.range_set import RangeSet
from cursorops.core.domain.analysis.backlog_audit import Thresholds
from cursorops.core.domain.analysis.poison_radar import (
    PendingCounts,
    RadarLimits,
    RadarResult,
    StuckMessage,
    merge,
    scan_partition,
    skip_request,
)
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.chunked_messages import chunk_rest
from cursorops.core.domain.ids.position import EARLIEST, Position

NOW = 1_000_000
Message = tuple[int, int, int]
"""(ledger, entry, batch index)."""


def messages_of(size: int) -> list[int]:
    return [-1] if size == 0 else list(range(size))


def model(
    entries: list[tuple[Position, int, int, int]],
    state: CursorState,
    pending: dict[Message, int],
    limits: RadarLimits,
    consumer_ack: Message | None,
) -> RadarResult:
    """Entries are (position, batch size, publish time, deliver-at time or -1)."""
    every = [
        ((p.ledger_id, p.entry_id, i), publish, deliver)
        for p, size, publish, deliver in entries
        for i in messages_of(size)
    ]
    acked = {m for m, _, _ in every if state.is_acked(Position(m[0], m[1]), m[2])}
    last = consumer_ack
    found = []
    for m, publish, deliver in every:
        due = max(publish, deliver)
        if m in acked or deliver > NOW:
            # Acknowledged, or delayed and not due yet: never stuck.
            continue
        count = pending.get(m, 0)
        red = limits.min_redeliveries is not None and count >= limits.min_redeliveries
        behind = (
            limits.min_age_s is not None
            and last is not None
            and m < last
            and NOW - due >= limits.min_age_s * 1000
        )
        if red or behind:
            found.append(StuckMessage(*m, count, publish, max(0, NOW - due), red, behind))
    found.sort(key=StuckMessage.sort_key)
    return RadarResult(
        len(found),
        sum(f.redelivered for f in found),
        sum(f.behind_acks for f in found),
        tuple(found[: limits.max_listed]),
    )


@st.composite
def worlds(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    positions = draw(
        st.lists(
            st.tuples(st.integers(1, 3), st.integers(0, 6)), min_size=1, max_size=14, unique=True
        )
    )
    entries = [
        (
            Position(*p),
            draw(st.sampled_from([0, 0, 1, 3, 5])),
            draw(st.sampled_from([0, 400_000, 990_000, NOW + 5])),
            draw(st.sampled_from([-1, -1, 0, 500_000, 995_000, NOW, NOW + 1, 2 * NOW])),
        )
        for p in positions
    ]
    deleted = RangeSet()
    batch_acks: dict[Position, int] = {}
    for position, size, _, _ in entries:
        choice = draw(st.integers(0, 3))
        if choice == 1:
            deleted.add(*position)
        elif choice == 2 and size >= 2:
            indexes = draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=size - 1))
            batch_acks[position] = ack_set.ack_many(ack_set.full(size), indexes)
    mark = draw(st.sampled_from([EARLIEST, *(p for p, _, _, _ in entries)]))
    live_batch = {p: b for p, b in batch_acks.items() if p > mark and not deleted.contains(*p)}
    state = CursorState(mark, deleted, live_batch)  # type: ignore[arg-type]
    # Pending: real messages (some acknowledged since) and a few that were never stored.
    candidates = [
        (p.ledger_id, p.entry_id, i) for p, size, _, _ in entries for i in messages_of(size)
    ]
    candidates += [(9, 0, -1), (1, 0, 7)]
    pending = draw(st.dictionaries(st.sampled_from(candidates), st.integers(0, 5), max_size=10))
    limits = RadarLimits(
        draw(st.sampled_from([None, 1, 2, 3])),
        draw(st.sampled_from([None, 0, 10, 600])),
        draw(st.integers(0, 8)),
    )
    # The consumers' last acknowledgement: none known, a stored message, or a position
    # that is not stored (trimmed, or between entries).
    consumer_ack = draw(
        st.one_of(
            st.none(),
            st.sampled_from(candidates),
            st.tuples(st.integers(0, 4), st.integers(0, 7), st.integers(-1, 5)),
        )
    )
    return entries, state, pending, limits, consumer_ack


def pending_counts(pending: dict[Message, int]) -> PendingCounts:
    keys = list(pending)
    return PendingCounts(
        np.array([k[0] for k in keys], np.int64),
        np.array([k[1] for k in keys], np.int64),
        np.array([k[2] for k in keys], np.int64),
        np.array(list(pending.values()), np.int64),
    )


@pytest.mark.slow
@given(worlds(), st.randoms(use_true_random=False))
@settings(max_examples=400, deadline=None)
def test_scan_partition_matches_the_model(world, rng) -> None:  # type: ignore[no-untyped-def]
    entries, state, pending, limits, consumer_ack = world
    shuffled = list(entries)
    rng.shuffle(shuffled)
    got = scan_partition(
        state,
        np.array([p.ledger_id for p, _, _, _ in shuffled], np.int64),
        np.array([p.entry_id for p, _, _, _ in shuffled], np.int64),
        np.array([s for _, s, _, _ in shuffled], np.int64),
        np.array([t for _, _, t, _ in shuffled], np.int64),
        pending_counts(pending),
        NOW,
        limits,
        consumer_ack=consumer_ack,
        deliver_at=np.array([d for _, _, _, d in shuffled], np.int64),
    )
    assert got == model(entries, state, pending, limits, consumer_ack)


def test_a_redelivered_message_and_one_left_behind() -> None:
    """Entry 1:0 redelivered 4 times; 1:1 index 0 old and behind 1:1:1, which a consumer
    acknowledged."""
    state = CursorState(batch_acks={Position(1, 1): ack_set.ack(ack_set.full(2), 1)})
    pending = PendingCounts(*(np.array([v], np.int64) for v in (1, 0, -1, 4)))
    got = scan_partition(
        state,
        [1, 1, 1],
        [0, 1, 2],
        [0, 2, 0],
        [0, 0, NOW],
        pending,
        NOW,
        RadarLimits(),
        consumer_ack=(1, 1, 1),
    )
    assert [(m.triplet, m.redelivery_count, m.redelivered, m.behind_acks) for m in got.listed] == [
        ("1:0", 4, True, True),
        ("1:1:0", 0, False, True),
    ]
    assert (got.stuck, got.redelivered, got.behind_acks) == (2, 1, 2)


def test_acknowledgements_no_consumer_made_leave_nothing_behind() -> None:
    """1:5 acknowledged by a skip, 1:0 by a consumer: the old messages 1:1 to 1:4 before the
    skipped one are not behind anything a consumer did; with no consumer acknowledgement
    known, nothing is behind at all."""
    skipped = RangeSet()
    skipped.add(1, 5)
    state = CursorState(Position(1, 0), skipped)
    entries = ([1] * 7, list(range(7)), [0] * 7, [0] * 7)
    none = PendingCounts.empty()
    got = scan_partition(state, *entries, none, NOW, RadarLimits(), consumer_ack=(1, 0, -1))
    assert (got.stuck, got.listed) == (0, ())
    assert scan_partition(state, *entries, none, NOW, RadarLimits(), consumer_ack=None).stuck == 0
    # A consumer acknowledged 1:3 (the rule's evidence): 1:1 and 1:2 are behind it.
    consumer = CursorState(Position(1, 0), skipped)
    consumer.individually_deleted.add(1, 3)
    got = scan_partition(consumer, *entries, none, NOW, RadarLimits(), consumer_ack=(1, 3, -1))
    assert [m.triplet for m in got.listed] == ["1:1", "1:2"]


def test_a_chunked_message_is_one_finding_at_its_last_chunk() -> None:
    """A in three chunks (1:0, 1:2, 1:3) with x (1:1) between, then y (1:4) acknowledged;
    every chunk of A pending, redelivered 4 times; then B, whose last chunk is not stored."""
    chunk_id = [0, -1, 1, 2, -1, 0]
    num_chunks = [3, 0, 3, 3, 0, 2]
    acked = RangeSet()
    acked.add(1, 4)
    state = CursorState(individually_deleted=acked)
    pending = PendingCounts(
        *(np.array(v, np.int64) for v in ([1] * 3, [0, 2, 3], [-1] * 3, [4] * 3))
    )
    got = scan_partition(
        state,
        [1] * 6,
        list(range(6)),
        [0] * 6,
        [0] * 6,
        pending,
        NOW,
        RadarLimits(),
        chunk_rest(chunk_id, num_chunks),
        consumer_ack=(1, 4, -1),
    )
    assert [(m.triplet, m.redelivery_count, m.redelivered, m.behind_acks) for m in got.listed] == [
        ("1:3", 4, True, True),
        ("1:1", 0, False, True),
    ]
    assert (got.stuck, got.redelivered, got.behind_acks) == (2, 1, 2)
    # Without the chunks marked, each chunk of A was a message of its own.
    each = scan_partition(
        state,
        [1] * 6,
        list(range(6)),
        [0] * 6,
        [0] * 6,
        pending,
        NOW,
        RadarLimits(),
        consumer_ack=(1, 4, -1),
    )
    assert (each.stuck, each.redelivered) == (4, 3)


def test_merge_orders_partitions_by_count_then_name() -> None:
    a = StuckMessage(1, 0, -1, 2, 0, 0, True, False, "t-partition-1")
    b = StuckMessage(2, 0, -1, 5, 0, 0, True, False, "t-partition-0")
    c = StuckMessage(3, 0, -1, 2, 0, 0, True, False, "t-partition-0")
    merged = merge([RadarResult(1, 1, 0, (a,)), RadarResult(2, 2, 0, (b, c))], 2)
    assert merged.listed == (b, c) and merged.stuck == 3


def test_limits_from_the_thresholds_document() -> None:
    assert Thresholds.from_json({}).radar == RadarLimits(3, 600, 50)
    got = Thresholds.from_json({"radar": {"minRedeliveries": 5, "minAgeSeconds": None}}).radar
    assert got == RadarLimits(5, None, 50) and got.enabled
    assert not RadarLimits.from_json({"minRedeliveries": None, "minAgeSeconds": None}).enabled


@pytest.mark.parametrize(
    ("radar", "message"),
    [
        ([], "Invalid thresholds: radar must be an object"),
        ({"minRedelivery": 3}, "Invalid thresholds: radar: unknown minRedelivery (known: "),
        (
            {"minRedeliveries": 0},
            "radar.minRedeliveries must be an integer >= 1 or null (off), got 0",
        ),
        (
            {"minAgeSeconds": -1},
            "radar.minAgeSeconds must be an integer >= 0 or null (off), got -1",
        ),
        (
            {"minAgeSeconds": "600"},
            "radar.minAgeSeconds must be an integer >= 0 or null (off), got '600'",
        ),
        ({"minRedeliveries": True}, "radar.minRedeliveries must be an integer >= 1"),
        ({"maxListed": None}, "radar.maxListed must be an integer from 0 to 1000, got None"),
        ({"maxListed": 1001}, "radar.maxListed must be an integer from 0 to 1000, got 1001"),
    ],
)
def test_bad_radar_limits_are_refused_in_one_line(radar: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        Thresholds.from_json({"radar": radar})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_skip_request_forms_carry_the_same_request() -> None:
    """The command line and the REST call name the same ids and reason: each a door that
    makes the request in one call."""
    import shlex

    found = [
        StuckMessage(7, 3, 2, 4, 0, 0, True, False),
        StuckMessage(7, 4, -1, 0, 0, 0, True, False),
    ]
    request = skip_request("persistent://a/b/t", "s", found, "poison 'pill'")
    conf = {
        "topic": "persistent://a/b/t",
        "subscription": "s",
        "message_ids": ["7:3:2", "7:4"],
        "reason": "poison 'pill'",
    }
    assert request["conf"] == conf and request["operation"] == "skip-messages"
    words = shlex.split(request["command"])
    assert words[:6] == ["cursorops", "topics", "skip-messages", conf["topic"], "-s", "s"]
    assert words[6:] == ["--messageId-triplet", "7:3:2", "7:4", "--reason", "poison 'pill'"]
    rest = request["rest"]
    assert rest["path"] == "/admin/v2/persistent/a/b/t/subscription/s/skipByMessageIds"
    assert rest["headers"] == {"X-Cursorops-Reason": "poison 'pill'"}
    assert rest["body"] == {
        "type": "messageId",
        "messageIds": [
            {"ledgerId": 7, "entryId": 3, "batchIndex": 2},
            {"ledgerId": 7, "entryId": 4},
        ],
    }
