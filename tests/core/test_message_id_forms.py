"""Every message id form a Pulsar user holds, read by the one parser (``MessageId.parse``):
each round-trips, and hostile text is one clear error line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.errors import InvalidMessageIdError
from cursorops.core.domain.ids.message_id import MessageId, parse_position
from cursorops.core.domain.ids.position import Position

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

ledgers = st.integers(0, INT64_MAX)
partitions = st.integers(-1, INT32_MAX)
batches = st.integers(-1, INT32_MAX)
spaces = st.text(alphabet=" ", max_size=3)


@given(ledgers, ledgers, partitions, batches)
def test_the_client_form_round_trips(ledger: int, entry: int, partition: int, batch: int) -> None:
    mid = MessageId(ledger, entry, partition, batch)
    text = mid.client_text()
    assert text == f"({ledger},{entry},{partition},{batch})"
    assert MessageId.parse(text) == mid
    assert MessageId.parse(text).partition == partition


@given(ledgers, ledgers, partitions, batches, st.lists(spaces, min_size=10, max_size=10))
def test_the_client_form_reads_spaces_around_each_number(
    ledger: int, entry: int, partition: int, batch: int, pad: list[str]
) -> None:
    text = (
        f"{pad[0]}({pad[1]}{ledger}{pad[2]},{pad[3]}{entry}{pad[4]},{pad[5]}{partition}"
        f"{pad[6]},{pad[7]}{batch}{pad[8]}){pad[9]}"
    )
    assert MessageId.parse(text) == MessageId(ledger, entry, partition, batch)


@given(ledgers, ledgers, batches)
def test_the_triplet_round_trips(ledger: int, entry: int, batch: int) -> None:
    mid = MessageId(ledger, entry, -1, batch)
    assert MessageId.parse(mid.triplet()) == mid
    # "ledger:entry:-1" is the whole entry, as "ledger:entry" is.
    assert MessageId.parse(f"{ledger}:{entry}:-1") == MessageId(ledger, entry)


@given(ledgers, ledgers, partitions, batches)
def test_base64_round_trips_with_its_partition(
    ledger: int, entry: int, partition: int, batch: int
) -> None:
    mid = MessageId(ledger, entry, partition, batch)
    assert MessageId.parse(mid.to_base64()) == mid
    assert MessageId.parse(mid.to_base64().rstrip("=")) == mid


@given(ledgers, ledgers, partitions, batches)
def test_every_printed_form_names_the_same_message(
    ledger: int, entry: int, partition: int, batch: int
) -> None:
    mid = MessageId(ledger, entry, partition, batch)
    read = {MessageId.parse(mid.client_text()), MessageId.parse(mid.to_base64())}
    assert read == {mid}
    triplet = MessageId.parse(mid.triplet())
    assert (triplet.ledger_id, triplet.entry_id, triplet.batch_index) == (ledger, entry, batch)


def test_the_python_clients_examples() -> None:
    assert MessageId.parse("(1,700,-1,-1)") == MessageId(1, 700)
    assert MessageId.parse("(1, 700, -1, -1)") == MessageId(1, 700)
    assert MessageId.parse("(1,700,2,3)") == MessageId(1, 700, 2, 3)
    assert MessageId.parse("1:700:-1") == MessageId(1, 700)
    assert MessageId(1, 700).client_text() == "(1,700,-1,-1)"


@pytest.mark.parametrize(
    "text",
    [
        "(1,700,-1)",
        "(1,700,-1,-1,-1)",
        "(1,700,-2,-1)",
        "(1,700,-1,-5)",
        "(-1,700,-1,-1)",
        "(1,-1,-1,-1)",
        "(-1,-1,-1,-1)",
        "(1,700,-0,-1)",
        "(1,700,-01,-1)",
        "(1,700,+1,-1)",
        f"({2**63},1,-1,-1)",
        f"(1,1,{2**31},-1)",
        f"(1,1,-1,{2**31})",
        "(" + "9" * 5000 + ",1,-1,-1)",
        "(\u0661,700,-1,-1)",
        "(\uff11,700,-1,-1)",
        "(1,700,-1,-1)x",
        "x(1,700,-1,-1)",
        "(1;700;-1;-1)",
        "(1,700,-1,-1",
        "(1\t,700,-1,-1)",
        "(1,700,\n-1,-1)",
        "\u00a0(1,700,-1,-1)",
        "(1,700\u2009,-1,-1)",
        "1:700:-2",
        "1:700:-1:-1",
        "-1:700",
        "1 :700",
        "\t1:700",
        "1:700\n",
        "\u0661:\u0662",
        f"{2**63}:1",
        f"1:1:{2**31}",
        "9" * 30 + ":1",
        "",
        "   ",
        "not base64!",
        "AAAA",
        "x" * 10_000,
    ],
)
def test_hostile_text_is_one_clear_line(text: str) -> None:
    with pytest.raises(InvalidMessageIdError) as info:
        MessageId.parse(text, "--message-id")
    message = str(info.value)
    assert message.startswith("Invalid --message-id")
    assert "\n" not in message and len(message) < 1000


def test_the_error_says_every_form_read() -> None:
    with pytest.raises(InvalidMessageIdError, match=r"\(1,700,-1,-1\)") as info:
        MessageId.parse("1-700", "--message-id")
    assert "ledgerId:entryId" in str(info.value) and "base64" in str(info.value)


def test_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidMessageIdError, match="not a string"):
        MessageId.parse(1700)


def test_a_position_takes_every_form_of_a_whole_entry() -> None:
    for text in ("3:7", "3:7:-1", "(3,7,-1,-1)", MessageId(3, 7).to_base64()):
        assert parse_position(text, "-m") == Position(3, 7)
    # The partition the command names: an id of it, or of none, is read.
    assert parse_position("(3,7,2,-1)", "-m", partition=2) == Position(3, 7)
    assert parse_position("(3,7,-1,-1)", "-m", partition=2) == Position(3, 7)


@pytest.mark.parametrize(
    ("text", "partition", "said"),
    [
        ("(3,7,1,-1)", -1, "the id is of partition 1, the command names a topic"),
        ("(3,7,1,-1)", 2, "the id is of partition 1, the command names partition 2"),
        ("(3,7,-1,4)", -1, "give 3:7"),
        ("3:7:4", -1, "give 3:7"),
    ],
)
def test_a_position_refuses_another_partition_and_a_batch_index(
    text: str, partition: int, said: str
) -> None:
    with pytest.raises(InvalidMessageIdError, match=said):
        parse_position(text, "-m", partition=partition)
