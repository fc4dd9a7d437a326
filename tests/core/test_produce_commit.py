"""Produce: a plain send commits every partition's segment together, and what counts as plain.

- One send of plain messages to a 16-partition topic registers its 16
  segments in one metadata transaction: when one partition's segment cannot
  be written, no partition gets anything, and a retry writes from the same
  entry ids.
- The files a plain send writes are byte for byte those the per-message path
  writes in another store (same ledger ids, names and Parquet bytes).
- The columnar path is taken exactly for the messages a per-message check
  calls plain (a plain Python model of the rule, against the vectorised one).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import LedgerStoreError, TopicNotFoundError
from cursorops.core.services.producer import OutgoingMessage, Producer, _all_plain
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.metadata import MetadataStore

from .conftest import file_digests

TOPIC = "persistent://acme/ops/together"


def _store(tmp_path: Path) -> tuple[MetadataStore, LedgerStore]:
    config = Config.from_home(tmp_path / "home")
    metadata = MetadataStore.from_config(config)
    metadata.create_tenant("acme")
    metadata.create_namespace("acme/ops")
    metadata.create_topic(TOPIC, 16)
    return metadata, LedgerStore(config.ledger_root, metadata, 1_000)


def test_a_plain_send_commits_every_partition_or_none(tmp_path: Path) -> None:
    metadata, store = _store(tmp_path)
    with metadata:
        producer = Producer(store, metadata.get_topic(TOPIC), "p", 10, start_partition=0)
        messages = [OutgoingMessage(b"%d" % i) for i in range(1_600)]
        # A file where partition 7's folder must go: its segment cannot be written.
        blocked = Path(store.root) / "acme" / "ops" / "together" / "partition-7"
        blocked.parent.mkdir(parents=True)
        blocked.write_bytes(b"")
        with pytest.raises(LedgerStoreError, match="partition-7"):
            producer.send(messages, now_ms=1)
        names = metadata.get_topic(TOPIC).partition_names()
        assert all(metadata.segments(name) == [] for name in names)
        assert all(_empty(metadata, name) for name in names)
        os.unlink(blocked)
        retry = Producer(store, metadata.get_topic(TOPIC), "p", 10, start_partition=0)
        ids = retry.send(messages, now_ms=1)
        assert {(i.partition, i.entry_id) for i in ids} == {
            (p, e) for p in range(16) for e in range(10)
        }
        assert all(len(metadata.segments(name)) == 1 for name in names)
        assert sum(s.messages for name in names for s in metadata.segments(name)) == 1_600


def test_plain_sends_write_the_bytes_the_per_message_path_writes(tmp_path: Path) -> None:
    written = []
    for path in ("columnar", "rows"):
        metadata, store = _store(tmp_path / path)
        with metadata:
            producer = Producer(store, metadata.get_topic(TOPIC), "p", 10, start_partition=5)
            for call in range(3):
                messages = [OutgoingMessage(b"%06d" % (call * 997 + i)) for i in range(997)]
                if path == "columnar":
                    producer.send(messages, now_ms=7)
                else:
                    producer._send_rows(messages, now_ms=7)
        written.append(file_digests(store.root))
    assert len(written[0]) == 3 * 16
    assert written[0] == written[1]


def _empty(metadata: MetadataStore, name: str) -> bool:
    return all(ledger.entries == 0 and ledger.messages == 0 for ledger in metadata.ledgers(name))


def _plain_model(message: object) -> bool:
    return (
        type(message) is OutgoingMessage
        and type(message.payload) is bytes
        and message.key is None
        and message.deliver_at is None
        and message.sequence_id is None
        and type(message.properties) is dict
        and not message.properties
    )


class _Subclass(OutgoingMessage):
    pass


_messages = st.one_of(
    st.just(OutgoingMessage(b"x")),
    st.builds(OutgoingMessage, st.binary(max_size=4)),
    st.builds(OutgoingMessage, st.binary(max_size=2), key=st.none() | st.text(max_size=2)),
    st.builds(OutgoingMessage, st.just(b"p"), properties=st.dictionaries(st.text(), st.text())),
    st.builds(OutgoingMessage, st.just(b"p"), deliver_at=st.none() | st.integers(0, 9)),
    st.builds(OutgoingMessage, st.just(b"p"), sequence_id=st.none() | st.integers(0, 9)),
    st.builds(OutgoingMessage, st.just(bytearray(b"p"))),  # type: ignore[arg-type]
    st.builds(_Subclass, st.just(b"p")),
    st.just("not a message"),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_messages, max_size=6))
def test_plain_is_decided_as_a_per_message_check_would(messages: list[object]) -> None:
    expected = bool(messages) and all(_plain_model(m) for m in messages)
    assert _all_plain(messages) == expected


def test_concurrent_plain_sends_over_overlapping_partitions(
    metadata_store: MetadataStore, tmp_path: Path
) -> None:
    """Writers of many partitions at once (each locking all of them in one query) neither
    deadlock nor hand out an entry twice, and a missing partition changes nothing."""
    metadata_store.create_tenant("acme")
    metadata_store.create_namespace("acme/ops")
    metadata_store.create_topic(TOPIC, 16)
    store = LedgerStore(str(tmp_path / "ledgers"), metadata_store, 5)
    topic = metadata_store.get_topic(TOPIC)
    results: dict[int, list[tuple[int, int, int]]] = {}
    errors: list[BaseException] = []

    def produce(writer: int) -> None:
        try:
            producer = Producer(store, topic, f"w{writer}", 3, start_partition=writer * 5 % 16)
            got = []
            for call in range(4):
                # 7 to 40 messages: some calls touch a few partitions, some all 16.
                payloads = [b"%d-%d-%d" % (writer, call, i) for i in range(7 + 11 * call)]
                ids = producer.send_columns(payloads, now_ms=1)
                got += zip(
                    ids.partition.tolist(),
                    ids.ledger_id.tolist(),
                    ids.entry_id.tolist(),
                    strict=True,
                )
            results[writer] = got
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    messages = sum(7 + 11 * call for call in range(4))
    assert sum(len(got) for got in results.values()) == 4 * messages
    # Each message's entry is the writer's own: no entry holds two writers' messages.
    owners: dict[tuple[int, int, int], int] = {}
    for writer, got in results.items():
        for entry in got:
            assert owners.setdefault(entry, writer) == writer
    stored = 0
    for name in topic.partition_names():
        table = store.read_table(name, columns=["entry_id"])
        stored += table.num_rows
        assert sum(info.messages for info in metadata_store.ledgers(name)) == table.num_rows
    assert stored == 4 * messages
    before = {name: metadata_store.segments(name) for name in topic.partition_names()}
    with (
        pytest.raises(TopicNotFoundError, match="persistent://acme/ops/together-partition-16"),
        metadata_store.append_entries_many(
            [(f"{TOPIC}-partition-3", 1), (f"{TOPIC}-partition-16", 1)], 5
        ),
    ):
        pass
    assert {name: metadata_store.segments(name) for name in topic.partition_names()} == before
