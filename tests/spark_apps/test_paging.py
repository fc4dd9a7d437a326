"""Paging without Spark: the driver's page arithmetic against the unpaged answer.

Each page here is made as the job makes it (count each partition's backlog
after the token, share the cap out with ``page_budgets``, analyse each
partition with its budget, cut with ``paginate``, parse the token back with
``parse_resume_token``), with ``cursorops.core.domain.analysis.backlog`` standing in for the Spark
groups. The reference is one uncapped ``cursorops.core.domain.analysis.backlog.analyze`` per
partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.analysis import backlog
from cursorops.core.domain.analysis.backlog import PartitionAnalysis
from cursorops.core.domain.analysis.topic_scan import ScanPartition, TopicScan
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.spark.analyze_backlog import (
    ResumeToken,
    analyze_entries,
    page_budgets,
    paginate,
    parse_resume_token,
)

TOPIC = "persistent://acme/ops/orders"


@dataclass(frozen=True)
class Partition:
    name: str
    ledger_ids: np.ndarray
    entry_ids: np.ndarray
    batch_sizes: np.ndarray
    state: CursorState


@st.composite
def topics(draw: st.DrawFn) -> list[Partition]:
    count = draw(st.integers(1, 3))
    names = [TOPIC] if count == 1 else [f"{TOPIC}-partition-{i}" for i in range(count)]
    ledger = 1
    out = []
    for name in names:
        ledgers, entries = [], []
        for _ in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, 6))
            ledgers += [ledger] * size
            entries += list(range(size))
            ledger += 1
        batch_sizes = [draw(st.sampled_from([0, 0, 3])) for _ in ledgers]
        layout = LedgerLayout.of((lid, ledgers.count(lid)) for lid in dict.fromkeys(ledgers))
        state = CursorState()
        targets = []
        for lid, eid, size in zip(ledgers, entries, batch_sizes, strict=True):
            kind = draw(st.sampled_from(["keep", "keep", "ack", "index"]))
            if kind == "ack":
                targets.append(AckTarget(Position(lid, eid)))
            elif kind == "index" and size:
                targets.append(AckTarget(Position(lid, eid), 1, size))
        if targets:
            state.merge(CursorState.ack_delta(targets), layout)
        out.append(
            Partition(
                name,
                np.array(ledgers, dtype=np.int64),
                np.array(entries, dtype=np.int64),
                np.array(batch_sizes, dtype=np.int64),
                state,
            )
        )
    return out


def scan_of(parts: list[Partition]) -> tuple[TopicScan, dict[int, str]]:
    sources = tuple(
        ScanPartition(
            p.name,
            -1 if len(parts) == 1 else i,
            (),
            tuple((lid, 0) for lid in np.unique(p.ledger_ids).tolist()),
        )
        for i, p in enumerate(parts)
    )
    scan = TopicScan(TOPIC, 0 if len(parts) == 1 else len(parts), sources, ())
    return scan, scan.ledger_owner


def one_page(
    parts: list[Partition], max_entries: int, token: ResumeToken | None
) -> list[PartitionAnalysis]:
    names = [p.name for p in parts]
    first = 0 if token is None else token.partition
    starts = {} if token is None else {names[first]: token.position}
    counts = {
        (p.name, "s"): backlog.analyze(
            p.state, p.ledger_ids, p.entry_ids, p.batch_sizes, start_after=starts.get(p.name)
        ).entries
        for p in parts
    }
    budgets = page_budgets(names, ["s"], counts, max_entries, first)
    analyses = [
        PartitionAnalysis(
            p.name,
            "s",
            analyze_entries(
                p.state,
                p.ledger_ids,
                p.entry_ids,
                p.batch_sizes,
                None,
                start_after=starts.get(p.name),
                max_entries=budgets[(p.name, "s")],
            ),
        )
        for p in parts
    ]
    return paginate(names, analyses, first)


@settings(max_examples=150, deadline=None)
@given(parts=topics(), max_entries=st.integers(1, 7))
def test_pages_sum_to_the_unpaged_analysis_and_never_overlap(
    parts: list[Partition], max_entries: int
) -> None:
    whole = {
        p.name: backlog.analyze(p.state, p.ledger_ids, p.entry_ids, p.batch_sizes) for p in parts
    }
    total = sum(r.entries for r in whole.values())
    scan, owners = scan_of(parts)
    summed = {p.name: [0] * len(backlog.COUNT_FIELDS) for p in parts}
    last: dict[str, tuple[int, int]] = {}
    token = None
    pages = 0
    while True:
        page = one_page(parts, max_entries, token)
        pages += 1
        assert sum(a.result.entries for a in page) <= max_entries
        for one in page:
            counts = [getattr(one.result, f) for f in backlog.COUNT_FIELDS]
            summed[one.topic_partition] = [
                a + b for a, b in zip(summed[one.topic_partition], counts, strict=True)
            ]
            if one.result.entries:
                first = tuple(map(int, str(one.result.first_message_id).split(":")))
                assert first > last.get(one.topic_partition, (-1, -1))
                last[one.topic_partition] = tuple(  # type: ignore[assignment]
                    map(int, str(one.result.last_message_id).split(":"))
                )
        texts = [a.result.resume_after for a in page if a.result.resume_after is not None]
        assert len(texts) <= 1
        if not texts:
            break
        token = parse_resume_token(texts[0], scan, owners)
        assert str(token) == texts[0]
    assert pages == max(1, -(-total // max_entries))
    for name, result in whole.items():
        assert summed[name] == [getattr(result, f) for f in backlog.COUNT_FIELDS]


def test_a_token_names_a_partition_and_one_of_its_ledgers() -> None:
    parts = [
        Partition(
            f"{TOPIC}-partition-{i}", np.array([i + 1]), np.array([0]), np.array([0]), CursorState()
        )  # fmt: skip
        for i in range(2)
    ]
    scan, owners = scan_of(parts)
    assert parse_resume_token("1:2:0", scan, owners) == ResumeToken(1, Position(2, 0))
    assert parse_resume_token("1:-1:-1", scan, owners) == ResumeToken(1, EARLIEST)
    assert parse_resume_token("2:0", scan, owners) == ResumeToken(1, Position(2, 0))
    for bad, why in [
        ("0:2:0", "belongs to"),
        ("2:1:0", "no partition 2"),
        ("0:9:0", "not a ledger of"),
        ("0:1:-1", "expected partition:ledgerId:entryId"),
        ("-1:1:0", "expected"),
        ("0:1:99999999999999999999", "expected"),
        ("0:1:9223372036854775808", "out of range"),
        ("x", "expected"),
    ]:
        with pytest.raises(InvalidArgumentError, match=why):
            parse_resume_token(bad, scan, owners)


@pytest.mark.parametrize("value", ["１２", "٣", "+2", " 2", "1_0"])
def test_max_entries_takes_ascii_digits_only(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the CLI's counts: argparse's int() alone took '１２' as a page of 12 (no Spark starts)."""
    from cursorops.spark import analyze_backlog

    with pytest.raises(SystemExit) as exited:
        analyze_backlog.main(["persistent://acme/ops/t", "--max-entries", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].count("error: ") == 1
    assert "ASCII decimal" in err
