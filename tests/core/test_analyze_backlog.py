"""PIP-187 through the broker: exact messages, and each subscription's entry filters."""

from __future__ import annotations

import pytest

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/analysis"


@pytest.fixture(params=["sqlite"])
def metadata_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def test_filters_split_the_exact_backlog(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=0)
    broker.admin.create_subscription(
        "admin",
        TOPIC,
        "f",
        SubscriptionType.SHARED,
        properties={
            "entryFilter.reject.key": "bad",
            "entryFilter.reschedule.property.kind": "later",
        },
        initial_position="earliest",
    )
    good = broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"g", key="good")] * 6, batch_size=3
    )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"b", key="bad")] * 4, batch_size=2)
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"l", properties={"kind": "later"})] * 5
    )
    # One index of the first good batch acknowledged: that batch counts 2 messages, not 3.
    assert (good[0].batch_index, good[0].batch_size) == (0, 3)
    skips.skip_messages(broker.gated, "admin", TOPIC, "f", [good[0]])
    result = broker.analysis.analyze_backlog("admin", TOPIC, "f")[0].result
    assert (result.entries, result.messages) == (2 + 2 + 5, 5 + 4 + 5)
    assert (result.filter_accepted_entries, result.filter_accepted_messages) == (2, 5)
    assert (result.filter_rejected_entries, result.filter_rejected_messages) == (2, 4)
    assert (result.filter_rescheduled_entries, result.filter_rescheduled_messages) == (5, 5)
