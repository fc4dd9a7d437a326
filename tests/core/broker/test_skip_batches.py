"""Skips written together in one transaction are the same skips written one after the
other: the same outcome each (skipped, already acknowledged, per partition), their
skip ids in order, and the same cursors afterwards. Checked against the plain model,
sequential writes, on two topics of identical content, and through the REST-facing
path (``skip_messages``) with the skips made to queue behind a held write lock."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.skip import SkipOutcome
from cursorops.core.domain.combining import Combiner
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skip_slice
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating.skip import ValidatedSkip, write_skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.metadata import MetadataStore

from ..conftest import write_lock_held

TOGETHER, APART = "persistent://acme/ops/together", "persistent://acme/ops/apart"
PARTITIONS, MESSAGES, BATCH = 2, 24, 4
"""Each topic: 24 messages in batches of 4 over 2 partitions (routed a batch at a time)."""

Key = tuple[int, int]
"""A message as (entry ordinal, batch index or -1): entries numbered in the order their
messages were produced, the same on both topics whatever partition routing began with."""

_names = itertools.count()


class Topic:
    """One of the two topics: its ids by message number, and the way back."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.name = name
        broker.admin.create_topic("admin", name, partitions=PARTITIONS)
        produced = broker.producing.produce(
            "admin", name, [OutgoingMessage(b"%d" % i) for i in range(MESSAGES)], batch_size=BATCH
        )
        self.ids = list(produced)
        self.ordinal: dict[tuple[int, int], int] = {}
        self.rank: dict[int, int] = {}
        for m in produced:
            self.ordinal.setdefault((m.ledger_id, m.entry_id), len(self.ordinal))
            self.rank.setdefault(m.partition, len(self.rank))

    def id_of(self, number: int, whole_entry: bool) -> MessageId:
        m = self.ids[number]
        return MessageId(m.ledger_id, m.entry_id, m.partition, -1) if whole_entry else m

    def key(self, m: MessageId) -> Key:
        return (self.ordinal[m.ledger_id, m.entry_id], m.batch_index)

    def seen(self, outcome: SkipOutcome) -> tuple[list[Key], list[Key], list[Key], list[int]]:
        by_rank = sorted(
            (self.rank[p], count)
            for p, count in enumerate(
                outcome.per_partition.get(f"{self.name}-partition-{p}", 0)
                for p in range(PARTITIONS)
            )
        )
        return (
            sorted(map(self.key, outcome.skipped)),
            sorted(map(self.key, outcome.already_acknowledged)),
            sorted(map(self.key, outcome.acknowledged_meanwhile)),
            [count for _, count in by_rank],
        )

    def acknowledged(self, broker: Broker, subscription: str) -> list[bool]:
        """Whether each message, by number, is acknowledged (a plan lists them by position)."""
        c = skip_slice.plan_skip(broker.gated, "admin", self.name, subscription, self.ids).columns
        number = {(m.ledger_id, m.entry_id, m.batch_index): n for n, m in enumerate(self.ids)}
        flags = [False] * len(self.ids)
        for row in range(len(c)):
            key = (int(c.ledger_id[row]), int(c.entry_id[row]), int(c.batch_index[row]))
            flags[number[key]] = bool(c.already_acknowledged[row])
        return flags


@pytest.fixture
def topics(broker: Broker) -> tuple[Topic, Topic]:
    return Topic(broker, TOGETHER), Topic(broker, APART)


message = st.tuples(st.integers(0, MESSAGES - 1), st.booleans())
requests = st.lists(st.lists(message, min_size=1, max_size=5, unique=True), min_size=2, max_size=6)


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=st.lists(message, max_size=6, unique=True), asked=requests)
def test_skips_written_together_are_the_same_as_written_one_by_one(
    broker: Broker,
    topics: tuple[Topic, Topic],
    before: list[tuple[int, bool]],
    asked: list[list[tuple[int, bool]]],
) -> None:
    together, apart = topics
    subscription = f"s{next(_names)}"
    for topic in topics:
        broker.admin.create_subscription(
            "admin", topic.name, subscription, SubscriptionType.SHARED, initial_position="earliest"
        )
        if before:
            skip_slice.skip_messages(
                broker.gated, "admin", topic.name, subscription, [topic.id_of(*m) for m in before]
            )
    validated = [
        skips.validate_skip(
            broker.gated, "admin", together.name, subscription, [together.id_of(*m) for m in ids]
        )
        for ids in asked
    ]
    written = write_skips(broker.metadata, validated, broker.clock())
    one_by_one = [
        write_skips(
            broker.metadata,
            [
                skips.validate_skip(
                    broker.gated, "admin", apart.name, subscription, [apart.id_of(*m) for m in ids]
                )
            ],
            broker.clock(),
        )[0]
        for ids in asked
    ]
    assert [together.seen(o) for o in written] == [apart.seen(o) for o in one_by_one]
    skip_ids = [skip_id(o) for o in written]
    assert skip_ids == sorted(skip_ids) and len(set(skip_ids)) == len(skip_ids)
    assert together.acknowledged(broker, subscription) == apart.acknowledged(broker, subscription)
    # The journal holds what the dispatcher replays: it delivers exactly the rest.
    for topic in topics:
        consumed = broker.reading.consume("admin", topic.name, subscription, 100)
        flags = topic.acknowledged(broker, subscription)
        rest = [n for n, acked in enumerate(flags) if not acked]
        assert sorted(topic.ids.index(c.message_id) for c in consumed) == rest


def test_skips_that_queue_behind_a_write_are_written_together(
    broker: Broker, topics: tuple[Topic, Topic], metadata_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through ``skip_messages``: the first skip waits for a held write lock, three more
    queue behind it in this process and are written in one transaction after it; each
    caller gets its own outcome and skip id, and overlapping asks are reported as the
    one-by-one order of the batch decides."""
    topic = topics[0]
    broker.admin.create_subscription(
        "admin", topic.name, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    # Entries 0 and 2 (messages 0-3 and 8-11): one partition, routed a batch at a time.
    asks = [
        [(0, False), (1, False)],
        [(1, False), (8, False)],
        [(8, True)],
        [(9, False), (2, False)],
    ]
    outcomes: dict[int, SkipOutcome] = {}
    batch_sizes: list[int] = []

    def counted(metadata: MetadataStore, skips: list[ValidatedSkip], at_ms: int) -> object:
        batch_sizes.append(len(skips))
        return write_skips(metadata, skips, at_ms)

    monkeypatch.setattr(skips, "write_skips", counted)

    def skip(n: int) -> None:
        ids = [topic.id_of(*m) for m in asks[n]]
        outcomes[n] = skip_slice.skip_messages(
            broker.gated, "admin", topic.name, "s", ids, via="rest"
        )

    lock = "SELECT id FROM cursors WHERE topic_partition = :partition FOR UPDATE"
    batches = skips.skip_writes(broker.gated)._batches
    key = (topic.name, "s")
    assert topic.ids[0].partition == topic.ids[8].partition
    held = f"{topic.name}-partition-{topic.ids[0].partition}"
    with write_lock_held(metadata_url, lock, partition=held):
        first = threading.Thread(target=skip, args=(0,))
        first.start()
        threads = [first]
        for n in (1, 2, 3):
            until(functools.partial(queued, batches, key, n - 1))
            threads.append(threading.Thread(target=skip, args=(n,)))
            threads[-1].start()
        until(lambda: batches.waiting(key) == 3)
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert batch_sizes == [1, 3]
    seen = [topic.seen(outcomes[n])[:2] for n in range(4)]
    assert seen == [
        ([(0, 0), (0, 1)], []),
        ([(2, 0)], [(0, 1)]),
        # The whole entry: index 0 of it was skipped by the skip before, in the same batch.
        ([(2, -1)], []),
        ([(0, 2)], [(2, 1)]),
    ]
    ids = [skip_id(outcomes[n]) for n in range(4)]
    assert ids == sorted(ids)
    records = {r.id: r for r in broker.workflow.audit_log("admin", topic.name, kind="skip")}
    assert all(records[i].detail["via"] == "rest" for i in ids)


def skip_id(outcome: SkipOutcome) -> int:
    assert outcome.skip_id is not None
    return outcome.skip_id


def queued(batches: Combiner[Any, Any, Any], key: tuple[str, str], count: int) -> bool:
    """Whether a batch of ``key`` runs and ``count`` skips wait behind it."""
    return batches.running(key) > 0 and batches.waiting(key) >= count


def until(condition: Callable[[], bool]) -> None:
    for _ in range(6000):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the skips never queued")


def test_a_large_skip_is_written_alone(
    broker: Broker, topics: tuple[Topic, Topic], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A skip of more than ``BATCHED_UP_TO`` messages never joins a batch: it waits only for
    the cursor locks it takes."""
    topic = topics[0]
    broker.admin.create_subscription(
        "admin", topic.name, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    monkeypatch.setattr(skips, "BATCHED_UP_TO", 2)
    batches = skips.skip_writes(broker.gated)._batches
    submitted: list[object] = []
    submit = batches.submit

    def spied(*args: object) -> SkipOutcome:
        submitted.append(args)
        return submit(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(batches, "submit", spied)
    large = skip_slice.skip_messages(broker.gated, "admin", topic.name, "s", topic.ids[:3])
    small = skip_slice.skip_messages(broker.gated, "admin", topic.name, "s", topic.ids[3:5])
    assert (len(large.skipped), len(small.skipped)) == (3, 2)
    assert len(submitted) == 1
