"""The cursor door's lock rule, held by the transaction itself: a cursor is written only after
its subscription was locked in the same transaction, and a cursor given by its id only after
the transaction read it under its row lock. A transaction that breaks the rule is a bug: it
fails and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cursorops.core.domain.errors import SubscriptionNotFoundError
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.cursor_door import Hold
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import MetadataStore

TOPIC = "persistent://acme/ops/door"
ANY = Ticket.ungated("a test's write, on a namespace that requires no approval")


@pytest.fixture
def store(metadata_url: str) -> Iterator[MetadataStore]:
    with MetadataStore(metadata_url) as store:
        store.create_tenant("acme")
        store.create_namespace("acme/ops")
        store.create_topic(TOPIC, 0)
        store.create_subscription(TOPIC, "s", SubscriptionType.SHARED, {}, {TOPIC: b""})
        yield store


def test_a_cursor_of_a_subscription_not_locked_is_not_written(store: MetadataStore) -> None:
    with (
        pytest.raises(RuntimeError, match="before its subscription was locked"),
        store.cursor_transaction() as work,
    ):
        work.append_to(TOPIC, "s", [b"delta"], ticket=ANY)
    with (
        pytest.raises(RuntimeError, match="before its subscription was locked"),
        store.cursor_transaction() as work,
    ):
        work.lock(TOPIC, "s", Hold.MOVE)
        work.append_to(TOPIC, "s", [b"delta"], ticket=ANY)
        work.compact(TOPIC, "other", b"", 0, ticket=ANY)
    assert store.load_cursor(TOPIC, "s").deltas == []


def test_a_cursor_not_read_under_its_lock_is_not_written(store: MetadataStore) -> None:
    with store.cursor_transaction() as work:
        ((cursor_id, record),) = work.read(TOPIC, "s", [TOPIC])
    assert record.version == 0
    for write in ("append", "fold"):
        with (
            pytest.raises(RuntimeError, match="before they were read"),
            store.cursor_transaction() as work,
        ):
            work.lock(TOPIC, "s", Hold.MOVE)
            if write == "append":
                work.append(cursor_id, [b"delta"], ticket=ANY)
            else:
                work.fold(cursor_id, b"", 0, [b"delta"], ticket=ANY)
    with store.cursor_transaction() as work:
        ((again, _),) = work.read(TOPIC, "s", [TOPIC])
        assert work.append(again, [b"delta"], ticket=ANY) == 1
    assert store.load_cursor(TOPIC, "s").deltas == [b"delta"]


def test_a_removed_subscription_takes_its_cursors_and_its_name_is_free(
    store: MetadataStore,
) -> None:
    store.append_cursor_delta(TOPIC, "s", b"delta")
    with store.cursor_transaction() as work:
        work.remove_subscription(TOPIC, "s", ticket=ANY)
    with pytest.raises(SubscriptionNotFoundError):
        store.load_cursor(TOPIC, "s")
    store.create_subscription(TOPIC, "s", SubscriptionType.SHARED, {}, {TOPIC: b"snapshot"})
    record = store.load_cursor(TOPIC, "s")
    assert (record.snapshot, record.deltas, record.version) == (b"snapshot", [], 0)
