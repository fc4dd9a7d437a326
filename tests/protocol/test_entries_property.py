"""Property: for any producer settings, what a consumer receives is what the producer sent,
field for field, through any mix of acknowledgements, negative acknowledgements, seeks (to
a message id, a publish time, the earliest or the latest), a new consumer, a reader that
reads and seeks, and a restart of the standalone (``kill -9``, then started again on the
same home and port, the same client reconnecting or a new one).

The model is Pulsar's: a seek resets the cursor, so every message before its entry is
acknowledged and every message from it on is delivered again, acknowledged or not; the
C++ client then drops, for the life of that consumer, what its start id excludes (the id
itself unless inclusive, and a batch's indexes before it). After a restart every message
whose acknowledgement the broker had stored is never delivered again, and every other one
is. Few examples: each is a topic, a producer, a consumer or two, and perhaps a restart.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pulsar
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from cursorops.core.domain.ids.position import Position
from tests.protocol.certs import message_keys
from tests.protocol.harness import Standalone, start, unique

pytestmark = pytest.mark.slow

ROLE = "admin"
CODECS = [
    pulsar.CompressionType.NONE,
    pulsar.CompressionType.LZ4,
    pulsar.CompressionType.ZLib,
    pulsar.CompressionType.ZSTD,
    pulsar.CompressionType.SNAPPY,
]
BIG = 5 * 1024 * 1024 + 4096
"""Past the standalone's maximum message size: sent in chunks when chunking is on."""
WAIT_MS = 30_000
"""How long a receive waits for a message that must come (a restart included)."""
QUIET_MS = 400
"""How long nothing more may come once a step's messages are in."""


@dataclass(frozen=True)
class Sent:
    payload: bytes | None
    key: str | None
    properties: dict[str, str]
    event_time: int | None
    ordering_key: str | None
    delay_ms: int


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=8)
message = st.builds(
    Sent,
    payload=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), texts.filter(bool)),
    properties=st.dictionaries(texts.filter(bool), texts, max_size=3),
    event_time=st.one_of(st.none(), st.integers(1, 2**40)),
    ordering_key=st.one_of(st.none(), st.text("abcxyz", min_size=1, max_size=6)),
    delay_ms=st.sampled_from([0, 0, 0, 300]),
)


@dataclass(frozen=True)
class Producing:
    batching: bool
    codec: pulsar.CompressionType
    chunking: bool
    encrypted: bool


producing = st.builds(
    Producing,
    batching=st.booleans(),
    codec=st.sampled_from(CODECS),
    chunking=st.booleans(),
    encrypted=st.booleans(),
)


# The steps. A number that picks a message is taken modulo the number of candidates.
@dataclass(frozen=True)
class Ack:
    """Acknowledge the held messages whose bit is set (in index order)."""

    mask: int


@dataclass(frozen=True)
class Nack:
    mask: int


@dataclass(frozen=True)
class SeekId:
    """Seek to the id of the ``pick``-th message in topic order."""

    pick: int


@dataclass(frozen=True)
class SeekTime:
    """Seek to the publish time of the ``pick``-th message, plus ``shift`` ms."""

    pick: int
    shift: int


@dataclass(frozen=True)
class SeekEdge:
    """Seek to ``MessageId.earliest`` or ``MessageId.latest``."""

    earliest: bool


@dataclass(frozen=True)
class Renew:
    """Close the consumer and subscribe a new one."""

    inclusive: bool


@dataclass(frozen=True)
class Restart:
    """``kill -9`` the standalone and start it again on the same home and port; the client
    reconnects, or (``new_client``) a new client subscribes a new consumer."""

    new_client: bool
    inclusive: bool


@dataclass(frozen=True)
class Read:
    """A reader from the ``start``-th message's id (``None``: earliest) reads to the end,
    then seeks (``seek``: a SeekId, SeekTime or SeekEdge) and reads to the end again."""

    start: int | None
    inclusive: bool
    seek: SeekId | SeekTime | SeekEdge


Step = Ack | Nack | SeekId | SeekTime | SeekEdge | Renew | Restart | Read

picks = st.integers(0, 31)
seeks = st.one_of(
    st.builds(SeekId, picks),
    st.builds(SeekTime, picks, st.sampled_from([-1, 0, 1])),
    st.builds(SeekEdge, st.booleans()),
)
step = st.one_of(
    st.builds(Ack, st.integers(0, 2**12 - 1)),
    st.builds(Nack, st.integers(1, 2**12 - 1)),
    seeks,
    st.builds(Renew, st.booleans()),
    st.builds(Restart, st.booleans(), st.booleans()),
    st.builds(Read, st.one_of(st.none(), picks), st.booleans(), seeks),
)
steps = st.lists(step, min_size=1, max_size=5).filter(
    lambda s: sum(isinstance(one, Restart) for one in s) <= 1
)


class Node:
    """A standalone that a step may kill and start again on the same home and port, and the
    test's client of it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.server: Standalone = start(home)
        self.client = self.server.client()

    def restart(self, new_client: bool) -> None:
        self.server.process.kill()
        self.server.process.wait(10)
        if new_client:
            with contextlib.suppress(pulsar.PulsarException):
                self.client.close()
        self.server = start(self.home, broker_port=self.server.port)
        if new_client:
            self.client = self.server.client()

    def close(self) -> None:
        with contextlib.suppress(pulsar.PulsarException):
            self.client.close()
        self.server.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    one = Node(Path(tmp_path_factory.mktemp("property")) / "home")
    try:
        yield one
    finally:
        one.close()


@pytest.fixture(scope="module")
def crypto(tmp_path_factory: pytest.TempPathFactory) -> pulsar.CryptoKeyReader:
    folder: Path = tmp_path_factory.mktemp("property-keys")
    public, private = message_keys(folder)
    return pulsar.CryptoKeyReader(str(public), str(private))


def _rest(sent: Sent) -> tuple[str | None, dict[str, str], int | None, str | None, int]:
    return sent.key, sent.properties, sent.event_time, sent.ordering_key, sent.delay_ms


def _fields(message: pulsar.Message) -> tuple[object, ...]:
    """What the consumer got, in the shape of :class:`Sent` (with the index property)."""
    return (
        None if message.has_null_value() else message.data(),
        message.partition_key() or None,
        message.properties(),
        message.event_timestamp() or None,
        message.ordering_key() or None,
    )


def _expected(index: int, sent: Sent) -> tuple[object, ...]:
    return (
        sent.payload,
        sent.key,
        {**sent.properties, "index": str(index)},
        sent.event_time,
        sent.ordering_key,
    )


@dataclass(frozen=True)
class Seen:
    """Where message ``index`` is stored, as its first delivery showed: a later delivery
    must show the same. A chunked message's entry is its last chunk's."""

    index: int
    ledger: int
    entry: int
    batch: int
    publish: int
    message_id: pulsar.MessageId

    @property
    def position(self) -> Position:
        return Position(self.ledger, self.entry)

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.ledger, self.entry, self.batch)


def _seen(index: int, message: pulsar.Message) -> Seen:
    mid = message.message_id()
    return Seen(
        index,
        mid.ledger_id(),
        mid.entry_id(),
        mid.batch_index(),
        message.publish_timestamp(),
        mid,
    )


def _dropped(seen: Seen, start: Seen | None, inclusive: bool) -> bool:
    """Whether the C++ client drops ``seen`` as coming before its start id (a seek's
    target, a reader's start): ``ConsumerImpl``'s ``isPrior`` rule, kept for the life of
    the consumer."""
    if start is None or seen.ledger != start.ledger:
        return False

    def prior(a: int, b: int) -> bool:
        return a < b if inclusive else a <= b

    if seen.batch >= 0:
        return seen.entry == start.entry and prior(seen.batch, start.batch)
    return prior(seen.entry, start.entry)


@dataclass
class Model:
    """The subscription's acknowledgements as the broker stores them, and what the client's
    current consumer drops."""

    order: list[Seen]
    inclusive: bool
    acked: set[int] = field(default_factory=set)
    start: Seen | None = None

    def pick(self, number: int) -> Seen:
        return self.order[number % len(self.order)]

    def at_time(self, timestamp: int) -> Seen | None:
        """The first message (in topic order) of the first entry published at or after
        ``timestamp``; ``None``: past the end."""
        return next((s for s in self.order if s.publish >= timestamp), None)

    def reset(self, target: Seen | None) -> None:
        """Pulsar's cursor reset to ``target``'s entry: before it acknowledged, from it on
        not (``None``: past the end, everything acknowledged)."""
        if target is None:
            self.acked = {s.index for s in self.order}
        else:
            self.acked = {s.index for s in self.order if s.position < target.position}

    def from_entry_of(self, target: Seen | None) -> list[Seen]:
        """What a cursor at ``target``'s entry reads, in order (``None``: nothing)."""
        if target is None:
            return []
        return [s for s in self.order if s.position >= target.position]

    def deliverable(self) -> set[int]:
        return {
            s.index
            for s in self.order
            if s.index not in self.acked and not _dropped(s, self.start, self.inclusive)
        }


class Run:
    """One example: a topic, its messages, the consumer and what it holds."""

    def __init__(
        self,
        node: Node,
        topic: str,
        sent: list[Sent],
        reader: pulsar.CryptoKeyReader | None,
        inclusive: bool,
    ) -> None:
        self.node = node
        self.topic = topic
        self.sent = sent
        self.reader = reader
        self.consumer = self.subscribe(inclusive)
        self.seen: dict[int, Seen] = {}
        self.model = Model([], inclusive)
        self.held: dict[int, pulsar.Message] = {}

    def subscribe(self, inclusive: bool) -> pulsar.Consumer:
        return self.node.client.subscribe(
            self.topic,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            crypto_key_reader=self.reader,
            negative_ack_redelivery_delay_ms=100,
            batch_index_ack_enabled=True,
            start_message_id_inclusive=inclusive,
        )

    def check(self, message: pulsar.Message) -> int:
        """The message's index, once its fields are what was sent and its id and publish
        time what its first delivery showed."""
        index = int(message.properties()["index"])
        assert _fields(message) == _expected(index, self.sent[index])
        seen = _seen(index, message)
        first = self.seen.setdefault(index, seen)
        assert (seen.order, seen.publish) == (first.order, first.publish), index
        return index

    def first_delivery(self) -> None:
        self.expect(set(range(len(self.sent))))
        self.model.order = sorted(self.seen.values(), key=lambda s: s.order)

    def expect(self, wanted: set[int], extra: frozenset[int] = frozenset()) -> None:
        """Receive each of ``wanted`` once, and then nothing more; ``extra`` may come once
        too (a batch's unacknowledged messages, redelivered with a nacked one)."""
        got: dict[int, pulsar.Message] = {}
        while not wanted <= set(got):
            self.take(self.consumer.receive(WAIT_MS), wanted | extra, got)
        with contextlib.suppress(pulsar.Timeout):
            while True:
                self.take(self.consumer.receive(QUIET_MS), wanted | extra, got)
        self.held.update(got)

    def take(
        self, message: pulsar.Message, allowed: set[int] | frozenset[int], got: dict[int, object]
    ) -> None:
        index = self.check(message)
        assert index in allowed, f"message {index} delivered, expected only {sorted(allowed)}"
        assert index not in got, f"message {index} delivered twice"
        got[index] = message

    def settle(self) -> None:
        """After a seek, a new consumer or a restart: the consumer holds nothing, and gets
        exactly what the model says."""
        self.held = {}
        self.expect(self.model.deliverable())

    def wait_stored(self, indexes: set[int]) -> None:
        """Until the broker has stored these acknowledgements (the client sends them
        grouped): only a stored one must survive a kill -9."""
        deadline = time.monotonic() + WAIT_MS / 1000
        while True:
            with self.node.server.broker() as broker:
                state = broker.analysis.cursor_state(ROLE, self.topic, "s")
            if all(state.is_acked(self.seen[i].position, self.seen[i].batch) for i in indexes):
                return
            assert time.monotonic() < deadline, f"acknowledgements {sorted(indexes)} not stored"
            time.sleep(0.05)

    def masked(self, mask: int) -> list[int]:
        return [i for bit, i in enumerate(sorted(self.held)) if mask >> bit & 1]

    def do(self, one: Step) -> None:
        model = self.model
        if isinstance(one, Ack):
            chosen = self.masked(one.mask)
            for index in chosen:
                self.consumer.acknowledge(self.held.pop(index))
            model.acked |= set(chosen)
            self.wait_stored(set(chosen))
        elif isinstance(one, Nack):
            chosen = self.masked(one.mask)
            for index in chosen:
                self.consumer.negative_acknowledge(self.held.pop(index))
            entries = {self.seen[i].position for i in chosen}
            mates = frozenset(i for i in self.held if self.seen[i].position in entries)
            self.expect(set(chosen), mates)
        elif isinstance(one, SeekId | SeekTime | SeekEdge):
            target, start = self.target(one)
            self.consumer.seek(self.seek_argument(one))
            model.reset(target)
            model.start = start
            self.settle()
        elif isinstance(one, Renew):
            self.consumer.close()
            self.consumer = self.subscribe(one.inclusive)
            model.start, model.inclusive = None, one.inclusive
            self.settle()
        elif isinstance(one, Restart):
            self.node.restart(one.new_client)
            if one.new_client:
                self.consumer = self.subscribe(one.inclusive)
                model.start, model.inclusive = None, one.inclusive
            self.connected()
            self.settle()
        else:
            self.read(one)

    def target(self, seek: SeekId | SeekTime | SeekEdge) -> tuple[Seen | None, Seen | None]:
        """Where a seek resets the cursor (``None``: past the end), and the start id the
        client keeps (``None``: it drops nothing)."""
        model = self.model
        if isinstance(seek, SeekId):
            chosen = model.pick(seek.pick)
            return chosen, chosen
        if isinstance(seek, SeekTime):
            return model.at_time(model.pick(seek.pick).publish + seek.shift), None
        return (model.order[0] if seek.earliest else None), None

    def seek_argument(self, seek: SeekId | SeekTime | SeekEdge) -> pulsar.MessageId | int:
        if isinstance(seek, SeekId):
            return self.model.pick(seek.pick).message_id
        if isinstance(seek, SeekTime):
            return self.model.pick(seek.pick).publish + seek.shift
        return pulsar.MessageId.earliest if seek.earliest else pulsar.MessageId.latest

    def connected(self) -> None:
        """Until the consumer is subscribed again (the client backs off between tries)."""
        deadline = time.monotonic() + WAIT_MS / 1000
        while not self.consumer.is_connected():
            assert time.monotonic() < deadline, "the consumer did not reconnect"
            time.sleep(0.05)

    def read(self, one: Read) -> None:
        model = self.model
        start = None if one.start is None else model.pick(one.start)
        reader = self.node.client.create_reader(
            self.topic,
            pulsar.MessageId.earliest if start is None else start.message_id,
            crypto_key_reader=self.reader,
            start_message_id_inclusive=one.inclusive,
        )
        try:
            wanted = model.order if start is None else model.from_entry_of(start)
            self.read_all(reader, [s for s in wanted if not _dropped(s, start, one.inclusive)])
            target, start = self.target(one.seek)
            reader.seek(self.seek_argument(one.seek))
            wanted = model.from_entry_of(target)
            self.read_all(reader, [s for s in wanted if not _dropped(s, start, one.inclusive)])
        finally:
            reader.close()

    def read_all(self, reader: pulsar.Reader, wanted: list[Seen]) -> None:
        got = [self.check(reader.read_next(WAIT_MS)) for _ in wanted]
        assert got == [s.index for s in wanted]
        with pytest.raises(pulsar.Timeout):
            reader.read_next(QUIET_MS)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    how=producing,
    sent=st.lists(message, min_size=1, max_size=10),
    big=st.booleans(),
    inclusive=st.booleans(),
    plan=steps,
)
@example(
    how=Producing(True, pulsar.CompressionType.LZ4, False, True),
    sent=[Sent(f"m{i}".encode(), None, {}, None, None, 0) for i in range(7)],
    big=False,
    inclusive=False,
    plan=[
        Ack(0b0100101),
        SeekId(3),
        Restart(new_client=False, inclusive=False),
        Read(2, True, SeekTime(5, 0)),
        SeekTime(1, 1),
    ],
)
@example(
    how=Producing(False, pulsar.CompressionType.ZSTD, True, False),
    sent=[Sent(b"x", "k", {"p": "v"}, 7, "o", 0), Sent(None, None, {}, None, None, 300)],
    big=True,
    inclusive=True,
    plan=[
        Nack(0b01),
        Ack(0b10),
        Restart(new_client=True, inclusive=True),
        SeekId(2),
        SeekEdge(earliest=False),
        Read(None, False, SeekId(1)),
        SeekEdge(earliest=True),
    ],
)
@example(
    # A chunked message negatively acknowledged: the client names its last chunk, and it
    # comes back whole.
    how=Producing(False, pulsar.CompressionType.LZ4, True, True),
    sent=[Sent(b"small", None, {}, None, None, 0)],
    big=True,
    inclusive=False,
    plan=[Nack(0b10), Nack(0b11), Ack(0b01)],
)
def test_the_consumer_receives_what_the_producer_sent(
    node: Node,
    crypto: pulsar.CryptoKeyReader,
    how: Producing,
    sent: list[Sent],
    big: bool,
    inclusive: bool,
    plan: list[Step],
) -> None:
    chunking = how.chunking and not how.batching
    if how.codec == pulsar.CompressionType.ZLib:
        # The C++ client cannot inflate a ZLIB entry whose payload is empty (it discards
        # it as corrupt, from Pulsar too): what its own producer writes for an empty or
        # null message sent alone (not batched, or delayed). docs/decisions/.
        sent = [s if s.payload else Sent(b"z", *_rest(s)) for s in sent]
    if big and chunking:
        sent = [*sent, Sent(os.urandom(BIG), "big", {}, None, None, 0)]
    reader = crypto if how.encrypted else None
    note(f"{how}, inclusive={inclusive}, {len(sent)} messages, steps {plan}")
    run = Run(node, unique("property"), sent, reader, inclusive)
    producer = node.client.create_producer(
        run.topic,
        batching_enabled=how.batching,
        batching_max_messages=4,
        batching_max_publish_delay_ms=20,
        compression_type=how.codec,
        chunking_enabled=chunking,
        encryption_key="property-key" if reader else None,
        crypto_key_reader=reader,
    )
    for index, one in enumerate(sent):
        producer.send_async(
            one.payload,
            None,
            properties={**one.properties, "index": str(index)},
            partition_key=one.key,
            ordering_key=one.ordering_key,
            event_timestamp=one.event_time,
            deliver_after=timedelta(milliseconds=one.delay_ms) if one.delay_ms else None,
        )
    producer.flush()
    producer.close()
    try:
        run.first_delivery()
        for one in plan:
            run.do(one)
        # Whatever happened, a new consumer gets every message not acknowledged, once.
        run.do(Renew(inclusive))
    finally:
        with contextlib.suppress(pulsar.PulsarException):
            run.consumer.close()
