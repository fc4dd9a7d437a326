"""``Producer.send_columns``: plain messages as a payload array, ids as columns.

- It writes the files ``send`` writes for the same payloads (byte for byte, same
  segment names) and returns the same ids, as columns, for lists of bytes and
  Arrow binary arrays, over partition counts, batch sizes, start partitions and
  several calls of one producer (round-robin and sequence ids carry over, also
  between ``send`` and ``send_columns``).
- Bad payloads, times and producer names get a one-line error and write nothing.
- :class:`MessageIdColumns` behaves as the list of ``MessageId`` it stands for.
- The buffer-built Arrow columns equal what ``pyarrow.array`` makes, and
  producing does not import pandas.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.message_id_columns import MessageIdColumns, concatenate
from cursorops.core.services.producer import OutgoingMessage, Producer
from cursorops.core.store import arrow_columns
from cursorops.core.store.ledger import MESSAGE_SCHEMA, LedgerStore
from cursorops.core.store.metadata import MetadataStore

from .conftest import file_digests

TOPIC = "persistent://acme/ops/columns"


def _store(home: Path, partitions: int, max_entries: int = 7) -> tuple[MetadataStore, LedgerStore]:
    config = Config.from_home(home)
    metadata = MetadataStore.from_config(config)
    metadata.create_tenant("acme")
    metadata.create_namespace("acme/ops")
    metadata.create_topic(TOPIC, partitions)
    return metadata, LedgerStore(config.ledger_root, metadata, max_entries)


def _full(ids: list[MessageId]) -> list[tuple[int, int, int, int, int]]:
    return [(i.ledger_id, i.entry_id, i.partition, i.batch_index, i.batch_size) for i in ids]


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    partitions=st.sampled_from([0, 1, 3, 16]),
    batch_size=st.integers(1, 5),
    start=st.integers(0, 15),
    calls=st.lists(
        st.tuples(st.integers(1, 40), st.sampled_from(["list", "arrow", "chunked", "send"])),
        min_size=1,
        max_size=3,
    ),
)
def test_send_columns_writes_and_returns_what_send_does(
    tmp_path_factory: pytest.TempPathFactory,
    partitions: int,
    batch_size: int,
    start: int,
    calls: list[tuple[int, str]],
) -> None:
    first = start % max(partitions, 1)
    written = []
    returned = []
    for way in ("columns", "objects"):
        metadata, store = _store(tmp_path_factory.mktemp(way), partitions)
        with metadata:
            producer = Producer(store, metadata.get_topic(TOPIC), "p", batch_size, first)
            ids: list[MessageId] = []
            number = 0
            for count, form in calls:
                payloads = [b"m%d" % (number + i) for i in range(count)]
                number += count
                if way == "objects" or form == "send":
                    ids += producer.send([OutgoingMessage(p) for p in payloads], now_ms=9)
                    continue
                column = pa.array(payloads, pa.binary())
                given_as = {
                    "list": payloads,
                    # A slice: the array's buffers start before its first value.
                    "arrow": pa.array([b"before", *payloads], pa.binary()).slice(1),
                    "chunked": pa.chunked_array([column.slice(0, 1), column.slice(1)]),
                }[form]
                sent = producer.send_columns(given_as, now_ms=9)
                assert isinstance(sent, MessageIdColumns) and len(sent) == count
                ids += sent.to_list()
            written.append(file_digests(store.root))
            returned.append(_full(ids))
    assert written[0] == written[1]
    assert returned[0] == returned[1]


def test_a_large_call_matches_send(tmp_path: Path) -> None:
    """One call over many entries and a ledger roll-over, on 16 partitions."""
    payloads = [b"%032d" % i for i in range(25_000)]
    results = []
    for way in ("columns", "objects"):
        metadata, store = _store(tmp_path / way, 16, max_entries=10)
        with metadata:
            producer = Producer(store, metadata.get_topic(TOPIC), "bench", 100, 3)
            if way == "columns":
                ids = producer.send_columns(payloads, now_ms=1).to_list()
            else:
                ids = producer.send([OutgoingMessage(p) for p in payloads], now_ms=1)
            results.append((file_digests(store.root), _full(ids)))
    assert results[0] == results[1]
    assert len(results[0][0]) == 32  # 16 entries per partition: two ledgers each


@pytest.mark.parametrize(
    ("payloads", "message"),
    [
        ([b"a", b"b", "c"], "Message 2: payload must be bytes, got str"),
        ([b"a", None], "Message 1: payload must be bytes, got NoneType"),
        (pa.array([b"a", None, b"c"], pa.binary()), "Message 1: payload must be bytes, got None"),
        (pa.array(["a"], pa.string()), "Payloads must be a binary Arrow array, got type string"),
        (b"abc", "Payloads must be a sequence of bytes, got bytes"),
        ("abc", "Payloads must be a sequence of bytes, got str"),
        (iter([b"a"]), "Payloads must be a sequence of bytes, got list_iterator"),
    ],
)
def test_bad_payloads_are_refused_and_nothing_is_written(
    tmp_path: Path, payloads: object, message: str
) -> None:
    metadata, store = _store(tmp_path, 4)
    with metadata:
        producer = Producer(store, metadata.get_topic(TOPIC), "p", 2, 0)
        with pytest.raises(InvalidArgumentError) as raised:
            producer.send_columns(payloads, now_ms=1)  # type: ignore[arg-type]
        assert str(raised.value) == message
        assert file_digests(store.root) == {}
        # Nothing moved: the next call starts where a fresh producer starts.
        ids = producer.send_columns([b"x", b"y", b"z"], now_ms=1)
        assert ids.partition.tolist() == [0, 0, 1]


@pytest.mark.parametrize("now_ms", [-1, True, 1.5, None])
def test_a_bad_publish_time_is_refused(tmp_path: Path, now_ms: object) -> None:
    metadata, store = _store(tmp_path, 2)
    with metadata:
        producer = Producer(store, metadata.get_topic(TOPIC), "p", 1, 0)
        with pytest.raises(InvalidArgumentError, match="Invalid publish time"):
            producer.send_columns([b"x"], now_ms)  # type: ignore[arg-type]
        assert file_digests(store.root) == {}


def test_times_and_names_the_columnar_writer_does_not_take_give_the_send_error(
    tmp_path: Path,
) -> None:
    metadata, store = _store(tmp_path, 2)
    with metadata:
        topic = metadata.get_topic(TOPIC)
        late = Producer(store, topic, "p", 1, 0)
        with pytest.raises(InvalidArgumentError, match="publish_time") as columns_error:
            late.send_columns([b"x"], 2**63)
        with pytest.raises(InvalidArgumentError, match="publish_time") as send_error:
            Producer(store, topic, "p", 1, 0).send([OutgoingMessage(b"x")], 2**63)
        assert str(columns_error.value) == str(send_error.value)
        with pytest.raises(InvalidArgumentError, match="not valid UTF-8"):
            Producer(store, topic, "bad\udc80", 1, 0).send_columns([b"x"], 1)
        assert file_digests(store.root) == {}


def test_no_payloads_write_nothing(tmp_path: Path) -> None:
    metadata, store = _store(tmp_path, 2)
    with metadata:
        producer = Producer(store, metadata.get_topic(TOPIC), "p", 1, 0)
        assert len(producer.send_columns([], 1)) == 0
        assert len(producer.send_columns(pa.array([], pa.binary()), 1)) == 0
        assert file_digests(store.root) == {}


# MessageIdColumns against the list of MessageId it stands for.

_ids = st.lists(
    st.builds(
        MessageId,
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
    ),
    max_size=12,
)


def _columns(ids: list[MessageId]) -> MessageIdColumns:
    return MessageIdColumns(
        *(
            np.array([getattr(i, name) for i in ids], np.int64)
            for name in ("ledger_id", "entry_id", "partition", "batch_index", "batch_size")
        )
    )


@settings(max_examples=200, deadline=None)
@given(ids=_ids, data=st.data())
def test_message_id_columns_act_as_the_list(ids: list[MessageId], data: st.DataObject) -> None:
    columns = _columns(ids)
    assert len(columns) == len(ids)
    assert list(columns) == ids and columns.to_list() == ids
    assert _full(list(columns)) == _full(ids)
    assert list(reversed(columns)) == ids[::-1]
    n = len(ids)
    index = data.draw(st.integers(-n - 2, n + 2))
    if -n <= index < n:
        assert columns[index] == ids[index]
        assert columns[index].batch_size == ids[index].batch_size
        assert ids[index] in columns
        assert columns.index(ids[index]) == ids.index(ids[index])
    else:
        with pytest.raises(IndexError):
            columns[index]
    window = slice(
        data.draw(st.none() | st.integers(-n - 1, n + 1)),
        data.draw(st.none() | st.integers(-n - 1, n + 1)),
        data.draw(st.none() | st.sampled_from([-2, -1, 1, 3])),
    )
    part = columns[window]
    assert isinstance(part, MessageIdColumns) and part.to_list() == ids[window]
    assert concatenate([columns, part]).to_list() == ids + ids[window]
    assert columns == _columns(ids)


def test_message_id_columns_equality_ignores_batch_size_and_columns_are_read_only() -> None:
    one = MessageIdColumns(
        np.array([5]), np.array([6]), np.array([1]), np.array([2]), np.array([10])
    )
    other = MessageIdColumns(
        np.array([5]), np.array([6]), np.array([1]), np.array([2]), np.array([0])
    )
    assert one == other and one != MessageIdColumns.empty()
    assert one[0] == MessageId(5, 6, 1, 2, 0)
    with pytest.raises(ValueError):
        one.entry_id[0] = 7
    with pytest.raises(AttributeError):
        one.entry_id = np.array([7])  # type: ignore[misc]
    with pytest.raises(TypeError):
        one["0"]  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="entry_id must be 1-D with 1 rows"):
        MessageIdColumns(np.array([5]), np.array([]), np.array([1]), np.array([2]), np.array([0]))


# The buffer-built columns against pyarrow.array.


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=8), max_size=20),
    ints=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
    text=st.text(max_size=6),
    count=st.integers(0, 20),
)
def test_arrow_columns_equal_pyarrow_array(
    payloads: list[bytes], ints: list[int], text: str, count: int
) -> None:
    binary = arrow_columns.binary(payloads)
    assert binary is not None and binary.equals(pa.array(payloads, pa.binary()))
    for dtype, kind in ((np.int32, pa.int32()), (np.int64, pa.int64())):
        values = np.array(ints, dtype)
        assert arrow_columns.from_numpy(values).equals(pa.array(values, kind))
        assert arrow_columns.from_numpy(values[::2]).equals(pa.array(values[::2], kind))
    assert arrow_columns.repeated_string(text, count).equals(pa.array([text] * count, pa.string()))
    maps = MESSAGE_SCHEMA.field("properties").type
    assert arrow_columns.empty_maps(count, maps).equals(pa.array([[]] * count, maps))


def test_producing_does_not_import_pandas(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from cursorops.core.domain.config import Config\n"
        "from cursorops.core.services.producer import OutgoingMessage, Producer\n"
        "from cursorops.core.store.ledger import LedgerStore\n"
        "from cursorops.core.store.metadata import MetadataStore\n"
        f"config = Config.from_home(Path({str(tmp_path)!r}))\n"
        "metadata = MetadataStore.from_config(config)\n"
        "metadata.create_tenant('acme')\n"
        "metadata.create_namespace('acme/ops')\n"
        "metadata.create_topic('persistent://acme/ops/t', 4)\n"
        "store = LedgerStore(config.ledger_root, metadata, 100)\n"
        "producer = Producer(store, metadata.get_topic('persistent://acme/ops/t'), 'p', 10)\n"
        "ids = producer.send_columns([b'x%d' % i for i in range(100)], 1)\n"
        "objects = producer.send([OutgoingMessage(b'y%d' % i) for i in range(100)], 2)\n"
        "assert len(ids) == len(objects) == 100\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
        "assert 'pyarrow.compute' not in sys.modules, 'pyarrow.compute imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
