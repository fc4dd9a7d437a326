"""Skip plans: plan, JSON round trip, per-partition shares, and apply that re-validates.

On SQLite and PostgreSQL. "Unacknowledged" is read through ``peek_messages``
(every unacknowledged message, delayed ones included), so each test checks
the whole subscription, not only the ids it named.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from cursorops.core.domain.acks.skip_plan import PlannedSkip, SkipPlan
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    EntryNotFoundError,
    InvalidArgumentError,
    InvalidMessageIdError,
    InvalidSkipPlanError,
    MetadataStoreError,
    PositionOutOfRangeError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from .conftest import Clock

TOPIC = "persistent://acme/ops/orders"
OTHER = "persistent://acme/ops/other"


def unacked(broker: Broker, sub: str = "s") -> set[tuple[int, int, int]]:
    """Every unacknowledged message of the subscription, as (ledger, entry, batch index)."""
    return {
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index)
        for m in broker.reading.peek_messages("admin", TOPIC, sub, 100_000)
    }


def key(mid: MessageId) -> tuple[int, int, int]:
    return (mid.ledger_id, mid.entry_id, mid.batch_index)


@pytest.fixture
def ids(broker: Broker, clock: Clock) -> list[MessageId]:
    """Three partitions: batches of 4 and single messages, one of them delayed."""
    broker.admin.create_topic("admin", TOPIC, partitions=3)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    batched = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"b{i}".encode()) for i in range(24)], batch_size=4
    )
    single = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(f"s{i}".encode()) for i in range(9)]
    )
    delayed = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"d", deliver_at=clock() + 60_000)]
    )
    return batched + single + delayed


def test_plan_round_trips_through_json_and_changes_nothing(
    broker: Broker, ids: list[MessageId], clock: Clock
) -> None:
    before = unacked(broker)
    chosen = [ids[1], ids[5], ids[-1], ids[-3]]
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", chosen)
    assert unacked(broker) == before
    assert plan.topic == TOPIC and plan.subscription == "s" and plan.planned_at_ms == clock()
    assert sorted(key(i.message_id) for i in plan.items) == sorted(map(key, chosen))
    assert {i.message_id.partition for i in plan.items} == {m.partition for m in chosen}
    assert [i.deliver_at for i in plan.items if key(i.message_id) == key(ids[-1])] == [
        clock() + 60_000
    ]
    text_form = json.dumps(plan.to_json())
    again = SkipPlan.from_json(text_form)
    assert again == plan and again.plan_id == plan.plan_id and len(plan.plan_id) == 64
    assert SkipPlan.from_json(plan.dumps()) == plan


def test_an_altered_or_malformed_document_is_refused(broker: Broker, ids: list[MessageId]) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:3])
    document = plan.to_json()
    items = document["items"]
    assert isinstance(items, list)
    items[0]["entryId"] += 1
    with pytest.raises(InvalidSkipPlanError, match="does not match its content"):
        SkipPlan.from_json(document)
    bad_documents: list[object] = [
        "not json",
        [],
        {**plan.to_json(), "format": 2},
        {**plan.to_json(), "extra": 1},
        {k: v for k, v in plan.to_json().items() if k != "items"},
        {**plan.to_json(), "items": [{**plan.items[0].to_json(), "ledgerId": True}]},
        {**plan.to_json(), "items": [{**plan.items[0].to_json(), "batchIndex": -2}]},
        {**plan.to_json(), "items": [{**plan.items[0].to_json(), "entryId": 1 << 63}]},
        {**plan.to_json(), "plannedAt": "1"},
    ]
    for bad in bad_documents:
        with pytest.raises(InvalidSkipPlanError):
            SkipPlan.from_json(bad)


def test_partitions_split_the_plan_exactly(broker: Broker, ids: list[MessageId]) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[::2])
    names = plan.partitions()
    assert names == tuple(f"{TOPIC}-partition-{p}" for p in sorted({m.partition for m in ids[::2]}))
    shares = [plan.for_partition(name) for name in names]
    assert sorted(key(i) for share in shares for i in share.message_ids()) == sorted(
        map(key, plan.message_ids())
    )
    assert all(share.part_of == plan.plan_id for share in shares)
    assert all(share.partitions() == (name,) for share, name in zip(shares, names, strict=True))
    assert SkipPlan.from_json(shares[0].dumps()) == shares[0]
    with pytest.raises(InvalidSkipPlanError):
        plan.for_partition(f"{TOPIC}-partition-9")


def test_apply_acknowledges_exactly_the_plan(broker: Broker, ids: list[MessageId]) -> None:
    rng = random.Random(7)
    for _ in range(4):
        before = unacked(broker)
        chosen = rng.sample(ids, 6)
        plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", chosen)
        outcome = skips.apply_skip(broker.gated, "admin", plan)
        assert unacked(broker) == before - {key(m) for m in chosen}
        newly = {key(m) for m in chosen} & before
        assert {key(m) for m in outcome.skipped} == newly
        assert sum(outcome.per_partition.values()) == len(newly)
        assert outcome.plan_id == plan.plan_id
    audit = [r for r in broker.metadata.audit_log(TOPIC) if r.kind == "skip"]
    assert len(audit) == 4 and audit[0].detail["planId"] == plan.plan_id


def test_a_whole_entry_plan_covers_its_batch(broker: Broker, ids: list[MessageId]) -> None:
    entry = ids[4]
    plan = skips.plan_skip(
        broker.gated, "admin", TOPIC, "s", [MessageId(entry.ledger_id, entry.entry_id)]
    )
    skips.apply_skip(broker.gated, "admin", plan)
    assert not any(u[:2] == (entry.ledger_id, entry.entry_id) for u in unacked(broker))


def test_a_stale_plan_reports_what_was_acknowledged_meanwhile(
    broker: Broker, ids: list[MessageId]
) -> None:
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[0]])
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", [ids[0], ids[1], ids[2]])
    skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[2]])
    outcome = skips.apply_skip(broker.gated, "admin", plan)
    assert [key(m) for m in outcome.already_acknowledged] == [key(ids[0])]
    assert [key(m) for m in outcome.acknowledged_meanwhile] == [key(ids[2])]
    assert [key(m) for m in outcome.skipped] == [key(ids[1])]
    assert outcome.to_pulsar_json()["acknowledgedMeanwhile"] == [ids[2].triplet()]
    rerun = skips.apply_skip(broker.gated, "admin", plan)
    assert rerun.skipped == [] and sum(rerun.per_partition.values()) == 0


def forge(plan: SkipPlan, **changes: object) -> SkipPlan:
    """The plan with its first item edited by hand; the plan id follows the content."""
    first = plan.items[0]
    fields = {**first.to_json(), **changes}
    item = PlannedSkip.from_json(fields, "items[0]")
    return SkipPlan(plan.topic, plan.subscription, (item, *plan.items[1:]), plan.planned_at_ms)


def test_apply_refuses_a_forged_plan_and_writes_nothing(
    broker: Broker, ids: list[MessageId]
) -> None:
    broker.admin.create_topic("admin", OTHER)
    broker.admin.create_subscription("admin", OTHER, "s", SubscriptionType.SHARED)
    theirs = broker.producing.produce("admin", OTHER, [OutgoingMessage(b"x")])[0]
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[:3])
    before = unacked(broker)
    audit = broker.metadata.audit_log()
    # OTHER's ledger was created last, so it lies beyond every ledger of TOPIC.
    elsewhere = forge(plan, ledgerId=theirs.ledger_id, entryId=theirs.entry_id)
    with pytest.raises(PositionOutOfRangeError, match="beyond the last entry of the topic"):
        skips.apply_skip(broker.gated, "admin", elsewhere)
    first = plan.items[0]
    moved = (first.partition + 1) % 3
    with pytest.raises(InvalidMessageIdError):
        skips.apply_skip(broker.gated, "admin", forge(plan, partition=moved))
    with pytest.raises(InvalidSkipPlanError):
        skips.apply_skip(
            broker.gated, "admin", forge(plan, topicPartition=f"{TOPIC}-partition-{moved}")
        )
    with pytest.raises(InvalidSkipPlanError, match="listed twice"):
        skips.apply_skip(
            broker.gated, "admin", SkipPlan(TOPIC, "s", (first, first), plan.planned_at_ms)
        )
    with pytest.raises(EntryNotFoundError, match="no ledger"):
        skips.apply_skip(
            broker.gated, "admin", SkipPlan(OTHER, "s", plan.items, plan.planned_at_ms)
        )
    with pytest.raises(InvalidSkipPlanError, match="canonical"):
        skips.apply_skip(broker.gated, "admin", SkipPlan("acme/ops/orders", "s", plan.items, 0))
    with pytest.raises(InvalidArgumentError):
        skips.plan_skip(broker.gated, "admin", TOPIC, "s", [])
    assert unacked(broker) == before
    assert broker.metadata.audit_log() == audit


def _refuse_audit_rows(url: str) -> None:
    """Make the database itself reject every audit row: a real failure at the audit write."""
    engine = create_engine(url)
    with engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
                    "BEGIN SELECT RAISE(ABORT, 'audit refused'); END"
                )
            )
        else:
            connection.execute(
                text(
                    "CREATE FUNCTION refuse_audit() RETURNS trigger AS "
                    "$$ BEGIN RAISE EXCEPTION 'audit refused'; END $$ LANGUAGE plpgsql"
                )
            )
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_audit()"
                )
            )
    engine.dispose()


def test_a_failing_audit_write_leaves_nothing_acknowledged(
    broker: Broker, ids: list[MessageId], metadata_url: str
) -> None:
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", ids[::3])
    assert len(plan.partitions()) == 3
    before = unacked(broker)
    cursors = {name: broker.metadata.load_cursor(name, "s") for name in plan.partitions()}
    _refuse_audit_rows(metadata_url)
    with pytest.raises(MetadataStoreError, match="audit refused"):
        skips.apply_skip(broker.gated, "admin", plan)
    with pytest.raises(MetadataStoreError, match="audit refused"):
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:2])
    assert unacked(broker) == before
    assert {name: broker.metadata.load_cursor(name, "s") for name in plan.partitions()} == cursors
    assert broker.metadata.audit_log() == []


def test_reading_a_plan_needs_neither_store_nor_pyarrow() -> None:
    """A DAG task or REST handler may parse a plan without the heavy imports."""
    code = (
        "import sys, cursorops.core.domain.acks.skip_plan; "
        "print(sorted(m for m in "
        "('pyarrow', 'sqlalchemy', 'pyspark', 'cursorops.core.services.broker') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_acknowledgement_racing_the_apply_is_reported_as_meanwhile(
    broker: Broker, ids: list[MessageId], home_config: Config, clock: Clock
) -> None:
    """Another writer acknowledges after apply validated the plan and before it writes: the
    decision is made under the row locks, so that message is reported as acknowledged
    meanwhile, not as skipped by this apply."""
    plan = skips.plan_skip(broker.gated, "admin", TOPIC, "s", [ids[0], ids[7]])
    raced: list[MessageId] = []

    def racing_clock() -> int:
        # Called by apply_skip between validating and its transaction: the moment of the race.
        if not raced:
            raced.append(ids[7])
            skips.skip_messages(broker.gated, "admin", TOPIC, "s", raced)
        return clock()

    with Broker(home_config, clock=racing_clock) as racer:
        outcome = skips.apply_skip(racer.gated, "admin", plan)
    assert [key(m) for m in outcome.skipped] == [key(ids[0])]
    assert [key(m) for m in outcome.acknowledged_meanwhile] == [key(ids[7])]
    audit = [r for r in broker.metadata.audit_log(TOPIC) if r.detail.get("planId") == plan.plan_id]
    assert [r.detail["skipped"] for r in audit] == [[ids[0].triplet()]]
