from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    InvalidTopicNameError,
    MetadataStoreError,
    NamespaceNotFoundError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.store.metadata import (
    AuditRecord,
    CursorRecord,
    LedgerInfo,
    MetadataStore,
    NamespaceInfo,
    SegmentInfo,
    SubscriptionInfo,
    TenantInfo,
    TopicInfo,
)

TOPIC = "persistent://acme/orders/events"
PARTITIONED = "persistent://acme/orders/payments"


def _run_threads(count: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            target(index)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.fixture
def store(metadata_store: MetadataStore) -> MetadataStore:
    """A store with tenant acme, namespace acme/orders and two topics."""
    metadata_store.create_tenant("acme", ["acme-admin"])
    metadata_store.create_namespace("acme/orders")
    metadata_store.create_topic(TOPIC, 0)
    metadata_store.create_topic(PARTITIONED, 3)
    return metadata_store


def _subscribe(
    store: MetadataStore, topic: str, name: str, snapshot: bytes = b"initial"
) -> SubscriptionInfo:
    info = store.get_topic(topic)
    snapshots = {partition: snapshot for partition in info.partition_names()}
    return store.create_subscription(topic, name, SubscriptionType.SHARED, {}, snapshots)


# Tenants.


def test_tenants(metadata_store: MetadataStore) -> None:
    assert metadata_store.list_tenants() == []
    created = metadata_store.create_tenant("zeta", ["ops", "admin-z"])
    assert created == TenantInfo("zeta", frozenset({"ops", "admin-z"}))
    metadata_store.create_tenant("alpha")
    assert metadata_store.get_tenant("zeta") == created
    assert metadata_store.get_tenant("alpha") == TenantInfo("alpha", frozenset())
    assert metadata_store.list_tenants() == ["alpha", "zeta"]


def test_tenant_errors(metadata_store: MetadataStore) -> None:
    metadata_store.create_tenant("acme")
    with pytest.raises(AlreadyExistsError, match="Tenant 'acme' already exists"):
        metadata_store.create_tenant("acme", ["x"])
    with pytest.raises(TenantNotFoundError, match="Tenant 'nope' not found"):
        metadata_store.get_tenant("nope")
    for bad in ("", "a/b", "has space", 7):
        with pytest.raises(InvalidArgumentError, match="Invalid tenant name"):
            metadata_store.create_tenant(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="collection of roles"):
        metadata_store.create_tenant("other", "admin")
    with pytest.raises(InvalidArgumentError, match="Invalid role"):
        metadata_store.create_tenant("other", [""])
    assert metadata_store.list_tenants() == ["acme"]


# Namespaces and permissions.


def test_namespaces(metadata_store: MetadataStore) -> None:
    metadata_store.create_tenant("acme")
    metadata_store.create_tenant("other")
    assert metadata_store.create_namespace("acme/b") == NamespaceInfo("acme/b", {})
    metadata_store.create_namespace("acme/a")
    metadata_store.create_namespace("other/c")
    assert metadata_store.get_namespace("acme/b") == NamespaceInfo("acme/b", {})
    assert metadata_store.list_namespaces("acme") == ["acme/a", "acme/b"]
    assert metadata_store.list_namespaces("other") == ["other/c"]


def test_namespace_errors(metadata_store: MetadataStore) -> None:
    metadata_store.create_tenant("acme")
    metadata_store.create_namespace("acme/orders")
    with pytest.raises(AlreadyExistsError, match="Namespace 'acme/orders' already exists"):
        metadata_store.create_namespace("acme/orders")
    with pytest.raises(TenantNotFoundError, match="Tenant 'ghost' not found"):
        metadata_store.create_namespace("ghost/orders")
    for bad in ("acme", "acme/a/b", "/orders", "acme/", "acme/with space", ""):
        with pytest.raises(InvalidArgumentError, match="Invalid"):
            metadata_store.create_namespace(bad)
    with pytest.raises(NamespaceNotFoundError, match="Namespace 'acme/nope' not found"):
        metadata_store.get_namespace("acme/nope")
    with pytest.raises(TenantNotFoundError):
        metadata_store.list_namespaces("ghost")


def test_permissions(store: MetadataStore) -> None:
    store.grant_permission("acme/orders", "reader", ["consume"])
    store.grant_permission("acme/orders", "writer", {"produce", "consume"})
    assert store.get_namespace("acme/orders").permissions == {
        "reader": frozenset({"consume"}),
        "writer": frozenset({"produce", "consume"}),
    }
    # A grant replaces the role's actions, as in Pulsar.
    store.grant_permission("acme/orders", "writer", ["produce"])
    assert store.get_namespace("acme/orders").permissions["writer"] == frozenset({"produce"})
    store.revoke_permission("acme/orders", "reader")
    assert store.get_namespace("acme/orders").permissions == {"writer": frozenset({"produce"})}
    store.revoke_permission("acme/orders", "never-granted")
    assert set(store.get_namespace("acme/orders").permissions) == {"writer"}


def test_permission_errors(store: MetadataStore) -> None:
    # Pulsar's AuthAction values are grantable (functions included); anything else is not.
    with pytest.raises(InvalidArgumentError, match=r"Invalid actions \['fly'\]"):
        store.grant_permission("acme/orders", "r", ["consume", "fly"])
    with pytest.raises(InvalidArgumentError, match="grant one or more of consume, functions"):
        store.grant_permission("acme/orders", "r", [])
    with pytest.raises(InvalidArgumentError, match="expected a collection"):
        store.grant_permission("acme/orders", "r", "consume")
    with pytest.raises(InvalidArgumentError, match="Invalid role"):
        store.grant_permission("acme/orders", "", ["consume"])
    with pytest.raises(NamespaceNotFoundError):
        store.grant_permission("acme/nope", "r", ["consume"])
    with pytest.raises(NamespaceNotFoundError):
        store.revoke_permission("acme/nope", "r")
    assert store.get_namespace("acme/orders").permissions == {}
    store.grant_permission("acme/orders", "f", ["functions", "sinks", "sources", "packages"])
    assert store.get_namespace("acme/orders").permissions["f"] == {
        "functions",
        "sinks",
        "sources",
        "packages",
    }


# Topics.


def test_topics(store: MetadataStore) -> None:
    assert store.get_topic(TOPIC) == TopicInfo(TOPIC, 0)
    assert store.get_topic(PARTITIONED) == TopicInfo(PARTITIONED, 3)
    assert store.get_topic("acme/orders/events") == TopicInfo(TOPIC, 0)
    assert store.list_topics("acme/orders") == [TopicInfo(TOPIC, 0), TopicInfo(PARTITIONED, 3)]
    assert TopicInfo(TOPIC, 0).partition_names() == [TOPIC]
    assert store.get_topic(PARTITIONED).partition_names() == [
        f"{PARTITIONED}-partition-0",
        f"{PARTITIONED}-partition-1",
        f"{PARTITIONED}-partition-2",
    ]
    store.create_tenant("public")
    store.create_namespace("public/default")
    assert store.create_topic("short", 1) == TopicInfo("persistent://public/default/short", 1)
    assert store.list_topics("public/default") == [
        TopicInfo("persistent://public/default/short", 1)
    ]


def test_topic_errors(store: MetadataStore) -> None:
    with pytest.raises(AlreadyExistsError, match=f"Topic '{TOPIC}' already exists"):
        store.create_topic(TOPIC, 0)
    # The base name of a partitioned topic clashes whatever the partition counts.
    with pytest.raises(AlreadyExistsError):
        store.create_topic(TOPIC, 4)
    with pytest.raises(AlreadyExistsError):
        store.create_topic(PARTITIONED, 0)
    with pytest.raises(InvalidTopicNameError, match="must not name a partition"):
        store.create_topic(f"{PARTITIONED}-partition-7", 0)
    with pytest.raises(InvalidTopicNameError):
        store.create_topic("persistent://acme/orders/bad topic", 0)
    for bad in (-1, True, 1.5):
        with pytest.raises(InvalidArgumentError, match="partition count"):
            store.create_topic("persistent://acme/orders/fresh", bad)  # type: ignore[arg-type]
    with pytest.raises(NamespaceNotFoundError, match="Namespace 'acme/nope' not found"):
        store.create_topic("persistent://acme/nope/t", 0)
    with pytest.raises(TopicNotFoundError, match="not found"):
        store.get_topic("persistent://acme/orders/missing")
    with pytest.raises(TopicNotFoundError):
        store.get_topic(f"{PARTITIONED}-partition-0")
    with pytest.raises(NamespaceNotFoundError):
        store.list_topics("acme/nope")
    assert [t.name for t in store.list_topics("acme/orders")] == [TOPIC, PARTITIONED]


# Subscriptions.


def test_subscriptions(store: MetadataStore) -> None:
    info = store.get_topic(PARTITIONED)
    snapshots = {name: f"snap-{i}".encode() for i, name in enumerate(info.partition_names())}
    created = store.create_subscription(
        PARTITIONED, "billing", SubscriptionType.KEY_SHARED, {"team": "pay"}, snapshots
    )
    assert created == SubscriptionInfo(
        PARTITIONED, "billing", SubscriptionType.KEY_SHARED, {"team": "pay"}
    )
    assert store.get_subscription(PARTITIONED, "billing") == created
    for name, snapshot in snapshots.items():
        assert store.load_cursor(name, "billing") == CursorRecord(snapshot, 0, [], 0)
    store.create_subscription(
        PARTITIONED,
        "audit",
        "Exclusive",  # type: ignore[arg-type]
        {},
        snapshots,
    )
    assert [s.name for s in store.list_subscriptions(PARTITIONED)] == ["audit", "billing"]
    assert store.get_subscription(PARTITIONED, "audit").type is SubscriptionType.EXCLUSIVE
    assert store.list_subscriptions(TOPIC) == []
    _subscribe(store, TOPIC, "billing")
    assert store.load_cursor(TOPIC, "billing").snapshot == b"initial"

    store.delete_subscription(PARTITIONED, "billing")
    assert [s.name for s in store.list_subscriptions(PARTITIONED)] == ["audit"]
    for name in info.partition_names():
        with pytest.raises(SubscriptionNotFoundError):
            store.load_cursor(name, "billing")
        assert store.load_cursor(name, "audit").snapshot == snapshots[name]
    # The other topic's subscription of the same name is untouched.
    assert store.get_subscription(TOPIC, "billing").topic == TOPIC


def test_delete_subscription_drops_its_journal(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s")
    store.append_cursor_delta(TOPIC, "s", b"d1")
    store.delete_subscription(TOPIC, "s")
    _subscribe(store, TOPIC, "s", b"fresh")
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"fresh", 0, [], 0)


def test_subscription_errors(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s")
    with pytest.raises(
        AlreadyExistsError, match=f"Subscription 's' already exists on topic '{TOPIC}'"
    ):
        _subscribe(store, TOPIC, "s")
    with pytest.raises(TopicNotFoundError):
        store.create_subscription(
            "persistent://acme/orders/none", "s", SubscriptionType.SHARED, {}, {}
        )
    partitions = store.get_topic(PARTITIONED).partition_names()
    wrong = [
        {name: b"" for name in partitions[:2]},
        {**{name: b"" for name in partitions}, f"{PARTITIONED}-partition-3": b""},
        {PARTITIONED: b""},
    ]
    for snapshots in wrong:
        with pytest.raises(InvalidArgumentError, match="exactly the partitions"):
            store.create_subscription(PARTITIONED, "x", SubscriptionType.SHARED, {}, snapshots)
    with pytest.raises(InvalidArgumentError, match="expected bytes"):
        store.create_subscription(
            TOPIC,
            "x",
            SubscriptionType.SHARED,
            {},
            {TOPIC: "text"},  # type: ignore[dict-item]
        )
    with pytest.raises(InvalidArgumentError, match="properties"):
        store.create_subscription(
            TOPIC,
            "x",
            SubscriptionType.SHARED,
            {"a": 1},  # type: ignore[dict-item]
            {TOPIC: b""},
        )
    with pytest.raises(InvalidArgumentError, match="subscription name"):
        store.create_subscription(TOPIC, "", SubscriptionType.SHARED, {}, {TOPIC: b""})
    with pytest.raises(InvalidArgumentError, match="subscription type"):
        store.create_subscription(TOPIC, "x", "Broadcast", {}, {TOPIC: b""})  # type: ignore[arg-type]
    assert [s.name for s in store.list_subscriptions(TOPIC)] == ["s"]
    assert store.list_subscriptions(PARTITIONED) == []

    with pytest.raises(SubscriptionNotFoundError) as info:
        store.get_subscription(TOPIC, "missing")
    assert "missing" in str(info.value) and TOPIC in str(info.value)
    with pytest.raises(SubscriptionNotFoundError, match="missing"):
        store.delete_subscription(TOPIC, "missing")
    with pytest.raises(TopicNotFoundError):
        store.list_subscriptions("persistent://acme/orders/none")


# Ledgers and segments.


def test_append_entries_allocates_and_rolls_over(store: MetadataStore) -> None:
    with store.append_entries(TOPIC, 3, 5) as allocation:
        assert (allocation.first_entry, allocation.count) == (0, 3)
        allocation.path = "seg-a"
        allocation.messages = 7
    first_ledger = allocation.ledger_id
    with store.append_entries(TOPIC, 4, 5) as allocation:
        # Only two entries are left in the ledger.
        assert (allocation.ledger_id, allocation.first_entry, allocation.count) == (
            first_ledger,
            3,
            2,
        )
        assert allocation.last_entry == 4
        allocation.path = "seg-b"
        allocation.messages = 2
    with store.append_entries(TOPIC, 2, 5) as allocation:
        assert allocation.ledger_id > first_ledger
        assert (allocation.first_entry, allocation.count) == (0, 2)
        allocation.path = "seg-c"
        allocation.messages = 2
    second_ledger = allocation.ledger_id
    assert store.ledgers(TOPIC) == [
        LedgerInfo(first_ledger, TOPIC, 5, 9),
        LedgerInfo(second_ledger, TOPIC, 2, 2),
    ]
    assert store.segments(TOPIC) == [
        SegmentInfo(first_ledger, 0, 2, 7, "seg-a"),
        SegmentInfo(first_ledger, 3, 4, 2, "seg-b"),
        SegmentInfo(second_ledger, 0, 1, 2, "seg-c"),
    ]
    assert store.find_ledger(second_ledger) == LedgerInfo(second_ledger, TOPIC, 2, 2)
    assert store.find_ledger(second_ledger + 1000) is None


def test_ledger_ids_are_unique_across_topics(store: MetadataStore) -> None:
    seen: list[int] = []
    for partition in [TOPIC, *store.get_topic(PARTITIONED).partition_names()] * 2:
        with store.append_entries(partition, 1, 1) as allocation:
            allocation.path = f"{partition}-{allocation.ledger_id}"
            allocation.messages = 1
        seen.append(allocation.ledger_id)
    assert len(set(seen)) == len(seen)
    assert store.find_ledger(seen[1]) == LedgerInfo(seen[1], f"{PARTITIONED}-partition-0", 1, 1)


def test_append_entries_failure_registers_nothing(store: MetadataStore) -> None:
    with store.append_entries(TOPIC, 2, 10) as allocation:
        allocation.path = "kept"
        allocation.messages = 2
    kept = store.ledgers(TOPIC)
    with pytest.raises(RuntimeError, match="disk on fire"), store.append_entries(TOPIC, 3, 10):
        raise RuntimeError("disk on fire")
    assert store.ledgers(TOPIC) == kept
    assert [s.path for s in store.segments(TOPIC)] == ["kept"]
    with store.append_entries(TOPIC, 3, 10) as allocation:
        assert (allocation.ledger_id, allocation.first_entry) == (kept[0].ledger_id, 2)
        allocation.path = "next"
        allocation.messages = 3
    # A failure that would have started a new ledger leaves no ledger behind.
    partition = f"{PARTITIONED}-partition-1"
    with pytest.raises(RuntimeError), store.append_entries(partition, 1, 10):
        raise RuntimeError("crash")
    assert store.ledgers(partition) == []
    assert store.segments(partition) == []


def test_append_entries_errors(store: MetadataStore) -> None:
    with (
        pytest.raises(TopicNotFoundError, match="not found"),
        store.append_entries("persistent://acme/orders/none", 1, 10),
    ):
        pass
    with pytest.raises(TopicNotFoundError), store.append_entries(PARTITIONED, 1, 10):
        pass
    with (
        pytest.raises(TopicNotFoundError),
        store.append_entries(f"{PARTITIONED}-partition-3", 1, 10),
    ):
        pass
    for n_entries, max_entries in [(0, 10), (1, 0), (-1, 10)]:
        with (
            pytest.raises(InvalidArgumentError),
            store.append_entries(TOPIC, n_entries, max_entries),
        ):
            pass
    with (
        pytest.raises(InvalidArgumentError, match="path was not set"),
        store.append_entries(TOPIC, 1, 10) as allocation,
    ):
        allocation.messages = 1
    with (
        pytest.raises(InvalidArgumentError, match="number of messages"),
        store.append_entries(TOPIC, 2, 10) as allocation,
    ):
        allocation.path = "p"
        allocation.messages = 1
    assert store.ledgers(TOPIC) == []
    with pytest.raises(TopicNotFoundError):
        store.ledgers("persistent://acme/orders/none")
    with pytest.raises(TopicNotFoundError):
        store.segments("persistent://acme/orders/none")


def test_concurrent_append_entries(store: MetadataStore) -> None:
    partitions = [TOPIC, f"{PARTITIONED}-partition-0"]
    granted: list[int] = []

    def append(thread: int) -> None:
        for round_ in range(15):
            partition = partitions[(thread + round_) % 2]
            with store.append_entries(partition, 1 + (thread + round_) % 4, 7) as allocation:
                allocation.path = f"t{thread}-r{round_}"
                allocation.messages = allocation.count
            granted.append(allocation.count)

    _run_threads(6, append)

    ledger_ids: list[int] = []
    for partition in partitions:
        ledgers = store.ledgers(partition)
        ledger_ids += [ledger.ledger_id for ledger in ledgers]
        segments = store.segments(partition)
        for ledger in ledgers:
            covered = [
                entry
                for segment in segments
                if segment.ledger_id == ledger.ledger_id
                for entry in range(segment.first_entry, segment.last_entry + 1)
            ]
            # Dense, no entry handed out twice, never beyond the rollover limit.
            assert covered == list(range(ledger.entries))
            assert ledger.entries <= 7
        # Every ledger but the last is full.
        assert all(ledger.entries == 7 for ledger in ledgers[:-1])
    assert len(granted) == 6 * 15
    assert sum(ledger.entries for p in partitions for ledger in store.ledgers(p)) == sum(granted)
    assert len(set(ledger_ids)) == len(ledger_ids)


# Cursors.


def test_cursor_journal_and_compaction(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s", b"S0")
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S0", 0, [], 0)
    assert [store.append_cursor_delta(TOPIC, "s", f"d{i}".encode()) for i in (1, 2, 3)] == [1, 2, 3]
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S0", 0, [b"d1", b"d2", b"d3"], 3)
    assert store.cursor_sizes(TOPIC, "s") == (2, 6)

    store.compact_cursor(TOPIC, "s", b"S2", 2)
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S2", 2, [b"d3"], 3)
    assert store.append_cursor_delta(TOPIC, "s", b"d4") == 4
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S2", 2, [b"d3", b"d4"], 4)
    assert store.cursor_sizes(TOPIC, "s") == (2, 4)

    # A compaction older than the stored snapshot changes nothing.
    store.compact_cursor(TOPIC, "s", b"stale", 1)
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S2", 2, [b"d3", b"d4"], 4)
    store.compact_cursor(TOPIC, "s", b"S4-long", 4)
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"S4-long", 4, [], 4)
    assert store.cursor_sizes(TOPIC, "s") == (7, 0)


def test_cursors_are_per_partition_and_subscription(store: MetadataStore) -> None:
    _subscribe(store, PARTITIONED, "a")
    _subscribe(store, PARTITIONED, "b")
    p0, p1, _ = store.get_topic(PARTITIONED).partition_names()
    assert store.append_cursor_delta(p0, "a", b"x") == 1
    assert store.append_cursor_delta(p0, "a", b"y") == 2
    assert store.append_cursor_delta(p1, "a", b"z") == 1
    assert store.append_cursor_delta(p0, "b", b"w") == 1
    assert store.load_cursor(p0, "a").deltas == [b"x", b"y"]
    assert store.load_cursor(p1, "a").deltas == [b"z"]
    assert store.load_cursor(p0, "b").deltas == [b"w"]


def test_cursor_errors(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s")
    partition = f"{PARTITIONED}-partition-0"
    for call in (
        lambda: store.load_cursor(TOPIC, "missing"),
        lambda: store.append_cursor_delta(TOPIC, "missing", b"x"),
        lambda: store.compact_cursor(TOPIC, "missing", b"x", 0),
        lambda: store.cursor_sizes(TOPIC, "missing"),
        lambda: store.load_cursor(partition, "s"),
        lambda: store.load_cursor(PARTITIONED, "s"),
    ):
        with pytest.raises(SubscriptionNotFoundError):
            call()
    with pytest.raises(SubscriptionNotFoundError) as info:
        store.load_cursor(TOPIC, "missing")
    assert "missing" in str(info.value) and TOPIC in str(info.value)
    with pytest.raises(InvalidArgumentError, match="expected bytes"):
        store.append_cursor_delta(TOPIC, "s", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="journal ends at version 0"):
        store.compact_cursor(TOPIC, "s", b"x", 1)
    with pytest.raises(InvalidArgumentError, match="through_version"):
        store.compact_cursor(TOPIC, "s", b"x", -1)
    with pytest.raises(InvalidArgumentError):
        store.compact_cursor(TOPIC, "s", None, 0)  # type: ignore[arg-type]
    assert store.load_cursor(TOPIC, "s") == CursorRecord(b"initial", 0, [], 0)


def test_concurrent_cursor_deltas_are_never_lost(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s")
    versions: list[list[int]] = [[] for _ in range(8)]

    def append(thread: int) -> None:
        for i in range(200):
            versions[thread].append(store.append_cursor_delta(TOPIC, "s", f"{thread}:{i}".encode()))

    _run_threads(8, append)
    flat = sorted(v for per_thread in versions for v in per_thread)
    assert flat == list(range(1, 1601))
    for per_thread in versions:
        assert per_thread == sorted(per_thread)
    record = store.load_cursor(TOPIC, "s")
    assert record.version == 1600
    assert sorted(record.deltas) == sorted(
        f"{t}:{i}".encode() for t in range(8) for i in range(200)
    )
    # The journal is in version order: each thread's deltas appear in the order it wrote them.
    for thread in range(8):
        mine = [d for d in record.deltas if d.startswith(f"{thread}:".encode())]
        assert mine == [f"{thread}:{i}".encode() for i in range(200)]


def _fold(record: CursorRecord) -> set[bytes]:
    """A toy cursor codec: the state is the set of deltas seen, newline-separated."""
    state = set(record.snapshot.split(b"\n")) - {b""} if record.snapshot else set()
    return state | set(record.deltas)


def test_compaction_racing_appends_loses_nothing(store: MetadataStore) -> None:
    _subscribe(store, TOPIC, "s", b"")
    stop = threading.Event()

    def work(thread: int) -> None:
        if thread == 0:
            while not stop.is_set():
                record = store.load_cursor(TOPIC, "s")
                store.compact_cursor(TOPIC, "s", b"\n".join(sorted(_fold(record))), record.version)
            return
        try:
            for i in range(150):
                store.append_cursor_delta(TOPIC, "s", f"{thread}:{i}".encode())
        finally:
            if thread == 1:
                stop.set()

    _run_threads(5, work)
    record = store.load_cursor(TOPIC, "s")
    assert record.version == 600
    assert _fold(record) == {f"{t}:{i}".encode() for t in range(1, 5) for i in range(150)}


_APPEND_SCRIPT = """
import sys
from cursorops.core.store.metadata import MetadataStore
store = MetadataStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append_cursor_delta(sys.argv[2], "s", f"{sys.argv[4]}:{i}".encode())
store.close()
"""


@pytest.mark.slow
def test_concurrent_cursor_deltas_from_processes(store: MetadataStore, metadata_url: str) -> None:
    _subscribe(store, TOPIC, "s")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPEND_SCRIPT, metadata_url, TOPIC, "60", f"p{n}"],
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    record = store.load_cursor(TOPIC, "s")
    assert record.version == 180
    assert sorted(record.deltas) == sorted(
        f"p{n}:{i}".encode() for n in range(3) for i in range(60)
    )


# Audit log.


def test_audit_log(store: MetadataStore) -> None:
    first = store.record_audit("skip", TOPIC, "s", "alice", {"ids": ["1:2"], "n": 1}, 1000)
    second = store.record_audit("grant", PARTITIONED, None, "root", {}, 2000)
    third = store.record_audit("skip", TOPIC, "s", "bob", {"ok": True}, 3000)
    assert first < second < third
    log = store.audit_log()
    assert [r.id for r in log] == [third, second, first]
    assert log[-1] == AuditRecord(
        first, 1000, "skip", TOPIC, "s", "alice", {"ids": ["1:2"], "n": 1}
    )
    assert log[1].subscription is None
    assert [r.id for r in store.audit_log(TOPIC)] == [third, first]
    assert [r.id for r in store.audit_log(limit=1)] == [third]
    assert store.audit_log("persistent://acme/orders/other") == []
    assert store.audit_log(limit=0) == []


def test_audit_errors(store: MetadataStore) -> None:
    with pytest.raises(InvalidArgumentError, match="JSON"):
        store.record_audit("skip", TOPIC, None, "r", {"x": object()}, 1)
    with pytest.raises(InvalidArgumentError, match="audit kind"):
        store.record_audit("", TOPIC, None, "r", {}, 1)
    with pytest.raises(InvalidArgumentError, match="audit time"):
        store.record_audit("skip", TOPIC, None, "r", {}, -1)
    with pytest.raises(InvalidArgumentError, match="limit"):
        store.audit_log(limit=-1)
    assert store.audit_log() == []


# Lifecycle.


def test_restart_sees_everything(store: MetadataStore, metadata_url: str) -> None:
    store.grant_permission("acme/orders", "reader", ["consume"])
    _subscribe(store, PARTITIONED, "s", b"snap")
    partition = f"{PARTITIONED}-partition-2"
    store.append_cursor_delta(partition, "s", b"d1")
    store.append_cursor_delta(partition, "s", b"d2")
    store.compact_cursor(partition, "s", b"snap2", 1)
    with store.append_entries(partition, 4, 3) as allocation:
        allocation.path = "seg"
        allocation.messages = 5
    audit_id = store.record_audit("skip", PARTITIONED, "s", "alice", {"n": 1}, 7)
    store.close()

    with MetadataStore(metadata_url) as again:
        assert again.get_tenant("acme") == TenantInfo("acme", frozenset({"acme-admin"}))
        assert again.get_namespace("acme/orders").permissions == {"reader": frozenset({"consume"})}
        assert again.list_topics("acme/orders") == [TopicInfo(TOPIC, 0), TopicInfo(PARTITIONED, 3)]
        assert again.get_subscription(PARTITIONED, "s").type is SubscriptionType.SHARED
        assert again.load_cursor(partition, "s") == CursorRecord(b"snap2", 1, [b"d2"], 2)
        assert again.ledgers(partition) == [LedgerInfo(allocation.ledger_id, partition, 3, 5)]
        assert again.segments(partition) == [SegmentInfo(allocation.ledger_id, 0, 2, 5, "seg")]
        assert [r.id for r in again.audit_log()] == [audit_id]
        # Ids keep growing after a restart.
        with again.append_entries(TOPIC, 1, 3) as fresh:
            fresh.path = "seg2"
            fresh.messages = 1
        assert fresh.ledger_id > allocation.ledger_id
        assert again.append_cursor_delta(partition, "s", b"d3") == 3


def test_from_config_creates_home(tmp_path: Path) -> None:
    config = Config.from_home(tmp_path / "deep" / "home")
    with MetadataStore.from_config(config) as store:
        store.create_tenant("acme")
    assert (tmp_path / "deep" / "home" / "metadata.db").is_file()
    with MetadataStore.from_config(config) as store:
        assert store.list_tenants() == ["acme"]


def test_in_memory_sqlite() -> None:
    with MetadataStore("sqlite://") as store:
        store.create_tenant("acme")
        assert store.list_tenants() == ["acme"]


def test_unusable_url_is_a_metadata_store_error(tmp_path: Path) -> None:
    with pytest.raises(MetadataStoreError):
        MetadataStore("not a url")
    with pytest.raises(MetadataStoreError):
        MetadataStore("nosuchdb://x/y")
    with pytest.raises(MetadataStoreError):
        MetadataStore("postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(MetadataStoreError):
        MetadataStore(f"sqlite:///{tmp_path / 'missing-dir' / 'db.sqlite'}")
