"""What the Airflow tests share: the seeded namespaces, topics and their checks.

The session's real Airflow and its cursorops home are the fixtures ``airflow``
and ``cursorops_home`` of ``tests/airflow_fixtures.py``. The cursorops home
(SQLite) is shared by the test process, which seeds topics and checks cursors
through the Broker, and by Airflow's task processes, which read it from
``CURSOROPS_HOME``.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.producer import OutgoingMessage

if TYPE_CHECKING:
    from tests.airflow_harness import Airflow

TENANT = "acme"
NAMESPACE = "acme/orders"
SECRET_NAMESPACE = "acme/secret"
SUBSCRIPTION = "billing"
SKIP_DAG = "cursorops_skip_messages"
REASON = "poison pills from a bad producer"
GRANTED = ("alice", "bob")
"""Pulsar roles with ``consume`` (hence skip) on acme/orders; dave and carol have none."""


@dataclass
class SeededTopic:
    config: Config
    topic: str
    ids: list[MessageId]
    """Every message produced, in order: batched orders, then delayed reminders."""

    def unacknowledged(self) -> set[str]:
        """``partition/L:E:B`` of every message a consumer would still get (delayed included)."""
        from cursorops.core.services.broker import Broker

        with Broker(self.config) as broker:
            messages = broker.reading.peek_messages("admin", self.topic, SUBSCRIPTION, 10_000)
        return {label(m.message_id) for m in messages}

    def audit(self, kind: str) -> list[dict[str, object]]:
        from cursorops.core.services.broker import Broker

        with Broker(self.config) as broker:
            return [r.detail for r in broker.metadata.audit_log(self.topic) if r.kind == kind]


def label(mid: MessageId) -> str:
    return f"{mid.partition}/{mid.ledger_id}:{mid.entry_id}:{max(mid.batch_index, -1)}"


def seed_topic(config: Config, namespace: str = NAMESPACE, partitions: int = 3) -> SeededTopic:
    """A partitioned topic: 60 keyed orders in batches of 5, 3 delayed reminders, and a
    Shared subscription at earliest that already acknowledged the first 7 messages."""
    from cursorops.core.services.broker import Broker, wall_clock_ms

    topic = f"persistent://{namespace}/events-{secrets.token_hex(4)}"
    with Broker(config) as broker:
        broker.admin.create_topic("admin", topic, partitions)
        broker.admin.create_subscription(
            "admin", topic, SUBSCRIPTION, SubscriptionType.SHARED, initial_position="earliest"
        )
        orders = [
            OutgoingMessage(
                payload=f"order #{i}".encode(), key=f"customer-{i % 5}", properties={"n": str(i)}
            )
            for i in range(60)
        ]
        ids = broker.producing.produce("admin", topic, orders, batch_size=5)
        due = wall_clock_ms() + 3_600_000
        reminders = [
            OutgoingMessage(payload=f"reminder #{i}".encode(), key=f"r{i}", deliver_at=due)
            for i in range(3)
        ]
        ids += broker.producing.produce("admin", topic, reminders)
        broker.reading.consume("admin", topic, SUBSCRIPTION, 7, ack=True)
    return SeededTopic(config, topic, ids)


def request_skip(
    airflow: Airflow,
    seeded: SeededTopic,
    ids: Sequence[MessageId],
    *,
    user: str = "alice",
    reason: str = REASON,
    ticket: str | None = "OPS-42",
    **params: Any,
) -> str:
    """A skip of ``ids`` requested as a door requests it, on any namespace: planned once and
    stored as a plan record bound to a new run, and that run started over Airflow's REST API
    as ``user`` with the record's digest (and ``params``: the gates' timeout and validity).
    The run's id."""
    from cursorops.core.services.broker import Broker, new_run_id, wall_clock_ms
    from cursorops.core.services.gating import Caller, Run, SkipMessages

    run = Run(SKIP_DAG, new_run_id(wall_clock_ms()))
    arguments = SkipMessages(
        topic=seeded.topic, subscription=SUBSCRIPTION, ids=tuple(ids), reason=reason, ticket=ticket
    )
    with Broker(seeded.config) as broker:
        record = broker.plan_request("skip-messages", Caller(user, user, "rest"), arguments, run)
    conf = {"plan_digest": record.digest, **params}
    return airflow.trigger(SKIP_DAG, conf, user=user, run_id=run.run_id)
