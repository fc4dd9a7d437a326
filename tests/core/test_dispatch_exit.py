"""A process that exits without closing its consumers frees them at once (clean exit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/exit"

_LEAVER = textwrap.dedent(
    """
    import sys
    from cursorops.core.services.broker import Broker
    from cursorops.core.domain.config import Config
    broker = Broker(Config.from_home(sys.argv[1]))
    consumer = broker.reading.dispatcher("admin", sys.argv[2], "s").subscribe("leaver", 10)
    assert len(consumer.receive_many(3)) == 3
    # exits without consumer.close()
    """
)


def test_a_clean_exit_frees_the_exclusive_slot_and_the_pending_messages(tmp_path: Path) -> None:
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC)
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.EXCLUSIVE, initial_position="earliest"
        )
        broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"m{i}".encode()) for i in range(3)]
        )
        subprocess.run(
            [sys.executable, "-c", _LEAVER, str(tmp_path), TOPIC], check=True, timeout=120
        )
        # Within the 30 s lease: the slot is free and the three messages come again.
        got = broker.reading.consume("admin", TOPIC, "s", 10)
        assert [m.payload for m in got] == [b"m0", b"m1", b"m2"]
        # A consumer that went is no redelivery (Pulsar counts only what a consumer asks).
        assert [m.redelivery_count for m in got] == [0, 0, 0]
