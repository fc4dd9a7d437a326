"""Randomised topics for the Spark tests, and the pure-``core`` answers they must equal."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import PartitionAnalysis
from cursorops.core.domain.analysis.entry_filters import EntryFilters, first_messages
from cursorops.core.domain.analysis.predicates import Predicate
from cursorops.core.domain.config import Config
from cursorops.core.domain.delivery.unacked_rows import unacked_rows
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage
from tests.conftest import acknowledge, acknowledge_cumulative, stored_cursor

NOW = 1_700_000_000_000
TOPIC = "persistent://acme/ops/orders"
KEYS = ["k0", "k1", "k2", "k3", None]
COLORS = ["red", "green", "blue"]
PRODUCERS = ["orders-a", "orders-b"]

FILTERS = {
    "entryFilter.reject.key": "k1",
    "entryFilter.reject.property.color": "red",
    "entryFilter.reschedule.deliverAt.after": str(NOW + 60_000),
}
"""The filtered subscription's entry filters: key, property and deliver-at."""


@dataclass(frozen=True)
class Installation:
    config: Config
    topic: str
    partitions: int


def make_topic(
    home: Path,
    seed: int,
    *,
    partitions: int = 3,
    messages: int = 240,
    topic: str = TOPIC,
) -> Installation:
    """A topic with batches (sizes 1-6), delayed messages, keys and properties, several
    ledgers per partition, two producers (:data:`PRODUCERS`, taking turns by round, so
    the random draws are those of one producer), and four subscriptions with scattered
    acknowledgements: ``plain`` and ``filtered`` (Shared, the latter with
    :data:`FILTERS`), ``keyed`` (Key_Shared) and ``exclusive`` (Exclusive)."""
    rng = random.Random(seed)
    # Unkeyed sends start round-robin at a random partition (Producer): seeded too, so that
    # a seed always makes the same topic.
    random.seed(seed)
    config = Config.from_home(home, max_entries_per_ledger=rng.choice([6, 15, 1000]))
    ticks = iter(range(NOW, NOW + 10**9, 1_000))
    with Broker(config, clock=lambda: next(ticks)) as broker:
        name = TopicName.parse(topic)
        if name.tenant not in broker.metadata.list_tenants():
            broker.admin.create_tenant("admin", name.tenant)
            broker.admin.create_namespace("admin", name.namespace_name)
        broker.admin.create_topic("admin", topic, partitions)
        for sub, kind, props in (
            ("plain", SubscriptionType.SHARED, {}),
            ("filtered", SubscriptionType.SHARED, FILTERS),
            ("keyed", SubscriptionType.KEY_SHARED, {"owner": "team-a"}),
            ("exclusive", SubscriptionType.EXCLUSIVE, {}),
        ):
            broker.admin.create_subscription("admin", topic, sub, kind, props, "earliest")
        sent = 0
        rounds = 0
        while sent < messages:
            count = min(messages - sent, rng.randint(10, 80))
            outgoing = [
                OutgoingMessage(
                    payload=json.dumps(
                        {"order": {"id": sent + i, "state": rng.choice(["new", "paid"])}}
                    ).encode(),
                    key=rng.choice(KEYS),
                    properties={"color": rng.choice(COLORS)} if rng.random() < 0.8 else {},
                    deliver_at=(
                        NOW + rng.choice([30_000, 120_000, 600_000]) if rng.random() < 0.1 else None
                    ),
                )
                for i in range(count)
            ]
            broker.producing.produce(
                "admin",
                topic,
                outgoing,
                batch_size=rng.choice([1, 3, 6]),
                producer_name=PRODUCERS[rounds % len(PRODUCERS)],
            )
            sent += count
            rounds += 1
        info = broker.metadata.get_topic(topic)
        for partition in info.partition_names():
            index = broker.ledgers.entry_index(TopicName.parse(partition))
            for sub in ("plain", "filtered", "keyed", "exclusive"):
                targets = []
                for ledger_id, entry_id, size in zip(
                    index.ledger_id.tolist(),
                    index.entry_id.tolist(),
                    index.batch_size.tolist(),
                    strict=True,
                ):
                    draw = rng.random()
                    position = Position(ledger_id, entry_id)
                    if draw < 0.15:
                        targets.append(AckTarget(position))
                    elif draw < 0.35 and size > 1:
                        picked = rng.sample(range(size), rng.randint(1, size - 1))
                        targets.extend(AckTarget(position, i, size) for i in picked)
                if targets:
                    acknowledge(broker, partition, sub, targets)
                if len(index) and rng.random() < 0.5:
                    row = rng.randrange(len(index))
                    acknowledge_cumulative(
                        broker,
                        partition,
                        sub,
                        Position(int(index.ledger_id[row]), int(index.entry_id[row])),
                    )
    return Installation(config, topic, partitions)


def _state(broker: Broker, partition: str, subscription: str) -> CursorState:
    return stored_cursor(broker, partition, subscription)


def core_analyses(
    config: Config, topic: str, *, max_entries: int | None = None
) -> list[PartitionAnalysis]:
    """The pure-Python answer: ``cursorops.core.domain.analysis.backlog.analyze`` with each
    subscription's
    filters."""
    out = []
    with Broker(config) as broker:
        info = broker.metadata.get_topic(topic)
        subs = broker.metadata.list_subscriptions(info.name)
        for partition in info.partition_names():
            entries = first_messages(broker.ledgers.read_table(TopicName.parse(partition)))
            for sub in subs:
                filters = EntryFilters.from_properties(sub.properties)
                result = backlog.analyze(
                    _state(broker, partition, sub.name),
                    entries.column("ledger_id").to_numpy(),
                    entries.column("entry_id").to_numpy(),
                    entries.column("batch_size").to_numpy(),
                    filters.verdicts(entries) if filters else None,
                    max_entries=max_entries,
                )
                out.append(PartitionAnalysis(partition, sub.name, result))
    return out


def peeked_matches(
    config: Config, topic: str, subscription: str, predicate: Predicate
) -> list[str]:
    """Triplets of the unacknowledged messages matching ``predicate``, found through the read
    path (``Broker.reading.peek_messages``), independently of
    :func:`cursorops.core.domain.delivery.unacked_rows.unacked_rows`."""
    with Broker(config, clock=lambda: NOW) as broker:
        messages = broker.reading.peek_messages("admin", topic, subscription, 1_000_000)
    if not messages:
        return []
    table = pa.Table.from_pylist(
        [
            {
                "key": m.key,
                "properties": list(m.properties.items()),
                "publish_time": m.publish_time,
                "deliver_at": m.deliver_at,
                "payload": m.payload,
                "producer_name": m.producer_name,
                "id": m.message_id.triplet(),
            }
            for m in messages
        ],
        schema=pa.schema(
            [
                ("key", pa.string()),
                ("properties", pa.map_(pa.string(), pa.string())),
                ("publish_time", pa.int64()),
                ("deliver_at", pa.int64()),
                ("payload", pa.binary()),
                ("producer_name", pa.string()),
                ("id", pa.string()),
            ]
        ),
    )
    chosen = table.filter(pa.array(predicate.mask(table)))
    return sorted(chosen.column("id").to_pylist())


def core_matches(config: Config, topic: str, subscription: str, predicate: Predicate) -> list[str]:
    """The same through ``core``'s predicates and entry filters on whole partitions, no Spark."""
    found = []
    with Broker(config) as broker:
        info = broker.metadata.get_topic(topic)
        for partition in info.partition_names():
            table = broker.ledgers.read_table(TopicName.parse(partition))
            live = table.filter(
                pa.array(unacked_rows(_state(broker, partition, subscription), table))
            )
            chosen = live.filter(pa.array(predicate.mask(live)))
            for row in chosen.select(["ledger_id", "entry_id", "batch_index"]).to_pylist():
                suffix = f":{row['batch_index']}" if row["batch_index"] >= 0 else ""
                found.append(f"{row['ledger_id']}:{row['entry_id']}{suffix}")
    return sorted(found)


def cursor_records(config: Config, topic: str) -> dict[tuple[str, str], tuple[int, int]]:
    """Every cursor's stored version and snapshot version: equal before and after = untouched."""
    with Broker(config) as broker:
        info = broker.metadata.get_topic(topic)
        subs = broker.metadata.list_subscriptions(info.name)
        out = {}
        for partition in info.partition_names():
            for sub in subs:
                record = broker.metadata.load_cursor(partition, sub.name)
                out[(partition, sub.name)] = (record.version, len(record.deltas))
        return out


def cursor_states(config: Config, topic: str, subscription: str) -> dict[str, CursorState]:
    with Broker(config) as broker:
        info = broker.metadata.get_topic(topic)
        return {p: _state(broker, p, subscription) for p in info.partition_names()}
