"""A redrive killed with SIGKILL part-way leaves all or nothing: the segments it wrote stay
invisible, no subscription's cursor moved, no audit record; redriving again publishes every
message once. The child process stops at a chosen point of its one transaction (by wrapping a
store call, in the child only) and is killed there. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import redrive
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/orders"
DLQ = "persistent://acme/ops/orders-billing-DLQ"
MESSAGES = 2_000
ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import sys, time
from cursorops.core.services.broker import Broker
from cursorops.core.domain.config import Config
from cursorops.core.services.gating import redrive
from cursorops.core.store.cursor_door import CursorTransaction
from cursorops.core.store.ledger import LedgerStore

home, url, stop_at = sys.argv[1:]
owner = {"append": LedgerStore, "audit": CursorTransaction}[stop_at]
name = {"append": "append_columns_many", "audit": "record_audits"}[stop_at]
original = getattr(owner, name)

def stopped(*args, **kwargs):
    result = original(*args, **kwargs)
    print("stopped", flush=True)
    time.sleep(600)
    return result

setattr(owner, name, stopped)
with Broker(Config.from_home(home, metadata_url=url)) as broker:
    plan = redrive.plan_redrive(broker.gated, "admin", "persistent://acme/ops/orders", "billing")
    redrive.apply_redrive(broker.gated, "admin", plan)
print("applied", flush=True)
"""


def state(broker: Broker) -> tuple[object, ...]:
    """What a redrive changes: each subscription's backlog, the entries, the audit records."""
    backlogs = tuple(
        len(broker.reading.peek_messages("admin", TOPIC, sub, 100_000))
        for sub in ("audit", "billing", "shipping")
    )
    dlq = len(broker.reading.peek_messages("admin", DLQ, "dlq-reader", 100_000))
    redrives = broker.workflow.audit_log("admin", TOPIC, kind="redrive")
    return backlogs, dlq, broker.analysis.entry_count("admin", TOPIC), len(redrives)


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["append", "audit"])
def test_a_redrive_killed_mid_transaction_leaves_nothing(
    tmp_path: Path, metadata_url: str, stop_at: str
) -> None:
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        for sub in ("audit", "billing", "shipping"):
            broker.admin.create_subscription(
                "admin", TOPIC, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
        broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(10)])
        broker.admin.create_topic("admin", DLQ)
        broker.admin.create_subscription(
            "admin", DLQ, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
        )
        dead = [OutgoingMessage(b"pill-%d" % i, key=f"k{i % 7}") for i in range(MESSAGES)]
        broker.producing.produce("admin", DLQ, dead)
        before = state(broker)
    assert before == ((10, 10, 10), MESSAGES, 10, 0)

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(config.home), metadata_url, stop_at],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == b"stopped\n", child.communicate(timeout=60)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(60)

    segments = sorted(p.name for p in Path(config.ledger_root).rglob("*.parquet"))
    with Broker(config) as broker:
        # The killed transaction's segment is on disk (beside the DLQ's and the topic's),
        # and listed nowhere, so read by nobody.
        assert len(segments) == 3 and len(broker.metadata.segments(TOPIC)) == 1
        assert state(broker) == before
        outcome = redrive.apply_redrive(
            broker.gated, "admin", redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
        )
        assert len(outcome.redriven) == MESSAGES
        assert state(broker) == ((10, 10 + MESSAGES, 10), 0, 10 + MESSAGES, 1)
        got = broker.reading.consume("admin", TOPIC, "billing", 100_000)
        assert [m.payload for m in got[10:]] == [m.payload for m in dead]
