"""``cursorops demo``: remove a poison pill from inside a batch and cancel a delayed message.

Each run uses a fresh topic, ``persistent://demo/ops/orders-<UTC time>-<random>``,
so running it again never meets the previous run's state; the tenant ``demo``
and the namespace ``demo/ops`` are created on the first run and reused. Every
step prints one line saying what it does and why, then what it found. The run
ends with checks; a failed check makes the command exit 1.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from cursorops.cli import output
from cursorops.core.domain.acks.skip import SkipOutcome
from cursorops.core.domain.analysis.backlog import TopicAnalysis
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import AlreadyExistsError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker, wall_clock_ms
from cursorops.core.services.gating import Applied, Caller, SkipMessages
from cursorops.core.services.gating.no_workflow import NoWorkflow
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Message

TENANT = "demo"
NAMESPACE = "demo/ops"
SUBSCRIPTION = "billing"
ORDERS = 200
BATCH_SIZE = 10
ACKED_FIRST = 60
PILL_INDEX = 157
PILL = b"POISON PILL: order with a malformed amount"
DELAYED = 4
HOUR_MS = 3_600_000
OPERATORS = ("alice", "bob")
"""Pulsar roles allowed to skip in the namespace: the README's browser and REST walks act
as them."""


def run(
    config: Config, role: str, *, partitions: int = 4, say: TextIO | None = None
) -> dict[str, object]:
    """Run the demo against ``config``'s installation; return a summary (and print to ``say``)."""
    step_count = 0

    def step(title: str, why: str) -> None:
        nonlocal step_count
        step_count += 1
        line(f"\n[{step_count}] {title}")
        line(f"    {why}")

    def line(text: str = "") -> None:
        if say is not None:
            print(text, file=say, flush=True)

    stamp = datetime.now(tz=UTC).strftime("%Y%m%d-%H%M%S")
    topic = f"persistent://{NAMESPACE}/orders-{stamp}-{secrets.token_hex(2)}"
    summary: dict[str, object] = {"topic": topic, "subscription": SUBSCRIPTION}

    with Broker(config) as broker:
        step(
            "Tenant and namespace",
            f"The demo keeps its topics in {NAMESPACE}; created on the first run, reused after. "
            f"{' and '.join(OPERATORS)} (users of make up's Airflow) may consume and skip there.",
        )
        _create_once(lambda: broker.admin.create_tenant(role, TENANT))
        _create_once(lambda: broker.admin.create_namespace(role, NAMESPACE))
        for user in OPERATORS:
            broker.admin.grant_permission(role, NAMESPACE, user, ["consume"])
        line(f"    home: {config.home}")

        step(
            f"Partitioned topic with {partitions} partitions",
            "A fresh topic name per run, so the demo can run again and again.",
        )
        broker.admin.create_topic(role, topic, partitions)
        line(f"    {topic}")

        step(
            f"Shared subscription '{SUBSCRIPTION}' at earliest",
            "Skipping by id needs Shared or Key_Shared; earliest so it sees every message.",
        )
        broker.admin.create_subscription(
            role, topic, SUBSCRIPTION, SubscriptionType.SHARED, initial_position="earliest"
        )

        step(
            f"Produce {ORDERS} orders in batches of {BATCH_SIZE}, and {DELAYED} delayed reminders",
            f"Order #{PILL_INDEX} is the poison pill, inside a batch; reminders are due in 1 h "
            "(delayed messages are never batched).",
        )
        orders = [
            OutgoingMessage(
                payload=PILL if i == PILL_INDEX else _order(i),
                key=f"customer-{i % 7}",
                properties={"kind": "order"},
            )
            for i in range(ORDERS)
        ]
        order_ids = broker.producing.produce(role, topic, orders, batch_size=BATCH_SIZE)
        due = wall_clock_ms() + HOUR_MS
        reminders = [
            OutgoingMessage(
                payload=f"reminder #{i}: invoice due".encode(),
                key=f"customer-{i}",
                properties={"kind": "reminder"},
                deliver_at=due,
            )
            for i in range(DELAYED)
        ]
        reminder_ids = broker.producing.produce(role, topic, reminders, batch_size=BATCH_SIZE)
        line(f"    {len(order_ids)} orders: {_short(order_ids[0])} ... {_short(order_ids[-1])}")
        line(f"    {len(reminder_ids)} reminders, e.g. {_short(reminder_ids[0])}")

        step(
            f"Consume {ACKED_FIRST} messages with acknowledgement",
            "The consumers did part of the work: some batches are now partly acknowledged.",
        )
        first = broker.reading.consume(role, topic, SUBSCRIPTION, ACKED_FIRST, ack=True)
        line(f"    received and acknowledged {len(first)} messages")

        step(
            "Backlog BEFORE (analyze-backlog, exact)",
            "Entries and messages: a partly acknowledged batch counts only its unacknowledged "
            "messages (Pulsar's PIP-187 would count it whole).",
        )
        before = TopicAnalysis.of(
            topic, SUBSCRIPTION, broker.analysis.analyze_backlog(role, topic, SUBSCRIPTION)
        )
        for text in output.analysis_lines(before)[1:]:
            line(f"  {text}")
        before_total = before.total
        backlog_messages = broker.reading.peek_messages(
            role, topic, SUBSCRIPTION, max(before_total.messages, 1)
        )
        whole = {(m.topic, m.position): max(m.message_id.batch_size, 1) for m in backlog_messages}
        line(
            f"    Pulsar's analyze-backlog would report {sum(whole.values())} messages here; "
            f"{before_total.messages} are really left."
        )

        step(
            "Find the poison pill and one delayed reminder (peek-messages)",
            "Peek shows unacknowledged messages, delayed ones included, without delivering them.",
        )
        pill = _first(backlog_messages, lambda m: m.payload == PILL)
        delayed = _first(backlog_messages, lambda m: m.deliver_at is not None)
        line(f"    pill:     {output.message_line(output.message_json(pill))}")
        line(f"    reminder: {output.message_line(output.message_json(delayed))}")

        step(
            "Skip both by id (one batch index, one delayed entry)",
            "All-or-nothing; each id is routed to its own partition by its ledger. Same as: "
            f"cursorops topics skip-messages {topic} -s {SUBSCRIPTION} --messageId-triplet "
            f"{pill.message_id.triplet()} {delayed.message_id.triplet()}",
        )
        ids = [
            MessageId.parse_triplet(pill.message_id.triplet()),
            MessageId.parse_triplet(delayed.message_id.triplet()),
        ]
        # The demo's namespace needs no approval (NoWorkflow refuses a request that would
        # wait for one): the skip is applied at once.
        applied = broker.request(
            "skip-messages",
            Caller(role, role),
            SkipMessages(topic=topic, subscription=SUBSCRIPTION, ids=tuple(ids)),
            NoWorkflow(),
        )
        assert isinstance(applied, Applied) and isinstance(applied.result, SkipOutcome)
        for skipped in applied.result.skipped:
            line(f"    skipped {_short(skipped)}")

        step(
            "Backlog AFTER",
            "Two messages fewer; one entry fewer (the reminder was a whole entry, the pill's "
            "batch still holds other unacknowledged orders).",
        )
        after = TopicAnalysis.of(
            topic, SUBSCRIPTION, broker.analysis.analyze_backlog(role, topic, SUBSCRIPTION)
        )
        for text in output.analysis_lines(after)[1:]:
            line(f"  {text}")
        after_total = after.total

        step(
            "Consume everything now available, with acknowledgement",
            "The pill is never delivered; the reminders are not due yet.",
        )
        now_messages = _drain(broker, role, topic)
        line(f"    received {len(now_messages)} messages")

    step(
        "Two hours later: consume what has come due",
        "A broker with its clock 2 h ahead: the other reminders arrive, the skipped one never.",
    )
    with Broker(config, clock=lambda: wall_clock_ms() + 2 * HOUR_MS) as later:
        later_messages = _drain(later, role, topic)
        for message in later_messages:
            line(f"    {output.message_line(output.message_json(message))}")
        final = TopicAnalysis.of(
            topic, SUBSCRIPTION, later.analysis.analyze_backlog(role, topic, SUBSCRIPTION)
        )
    final_total = final.total

    delivered = {(m.topic, m.message_id) for m in [*first, *now_messages, *later_messages]}
    checks = {
        "pill never delivered": (pill.topic, pill.message_id) not in delivered,
        "skipped reminder never delivered": (delayed.topic, delayed.message_id) not in delivered,
        "backlog after = before - 2 messages": after_total.messages == before_total.messages - 2,
        "backlog after = before - 1 entry": after_total.entries == before_total.entries - 1,
        "every other message delivered exactly once": len(delivered)
        == len(first) + len(now_messages) + len(later_messages)
        == ORDERS + DELAYED - 2,
        "final backlog is 0": final_total.messages == 0,
    }
    step("Checks", "What the demo set out to show.")
    for name, ok in checks.items():
        line(f"    {'ok  ' if ok else 'FAIL'}  {name}")
    line(
        f"\nBacklog before: {before_total.entries} entries / {before_total.messages} "
        f"messages; after: {after_total.entries} entries / {after_total.messages} messages."
    )
    summary.update(
        {
            "pill": output.id_json(pill.message_id),
            "delayed": output.id_json(delayed.message_id),
            "backlogBefore": before.to_pulsar_json(),
            "backlogAfter": after.to_pulsar_json(),
            "delivered": len(delivered),
            "checks": checks,
            "ok": all(checks.values()),
        }
    )
    return summary


def _create_once(create: Callable[[], object]) -> None:
    with contextlib.suppress(AlreadyExistsError):
        create()


def _order(i: int) -> bytes:
    return f"order #{i}: amount={10 + i % 90}.00".encode()


def _first(messages: list[Message], wanted: Callable[[Message], bool]) -> Message:
    for message in messages:
        if wanted(message):
            return message
    raise RuntimeError("the demo did not find the message it planted")


def _drain(broker: Broker, role: str, topic: str) -> list[Message]:
    received: list[Message] = []
    while True:
        got = broker.reading.consume(role, topic, SUBSCRIPTION, 1000, ack=True)
        if not got:
            return received
        received.extend(got)


def _short(message_id: MessageId) -> str:
    return f"{message_id.triplet()} (partition {message_id.partition})"
