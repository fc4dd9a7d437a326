"""The CLI's text output shows someone else's text as the Cursors pages do: legible, cut
after CELL_CHARS characters with the cut said, its table's columns aligned on the width each
cell takes in a terminal; ``-o json`` keeps every value whole."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.cli.output import analysis_document_lines
from cursorops.core.domain.legible import CELL_CHARS, columns, legible
from tests.cli.test_cli_fuzz import _run
from tests.hostile_text import HOSTILE, hidden_in

TOPIC = "acme/ops/cut"
NAMES = (
    "plain",
    "inv\u202egnp.exe",
    "pii\u200b=yes",
    "Rückbuchung für Kunde 顧客 🧾 OPS\u20119",
    "\u2066isolated\u2069\u200f\u061c\ufeff\u00ad",
    "e\u0301",
    "f" * 64,
    "n" * 300,
)
"""Subscription names of hostile text (the names rule refuses controls)."""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("text-cut")
    previous = os.environ.get("CURSOROPS_HOME")
    os.environ["CURSOROPS_HOME"] = str(root)
    try:
        for args in (
            ["tenants", "create", "acme"],
            ["namespaces", "create", "acme/ops"],
            ["topics", "create", TOPIC],
            *(
                ["topics", "create-subscription", TOPIC, "-s", name, "-m", "earliest"]
                for name in NAMES
            ),
            ["produce", TOPIC, "-m", "p" * 20_000, "-k", "k\u202e" * 100],
        ):
            code, _out, err = _run(args)
            assert code == 0, (args, err)
        yield root
    finally:
        if previous is None:
            os.environ.pop("CURSOROPS_HOME", None)
        else:
            os.environ["CURSOROPS_HOME"] = previous


def test_a_long_payload_and_key_are_cut_in_text_and_whole_in_json(home: Path) -> None:
    code, out, err = _run(["topics", "peek-messages", TOPIC, "-s", "plain", "-n", "1"])
    assert code == 0, err
    assert not any(hidden_in(line) for line in out.splitlines())
    payload = "p" * CELL_CHARS + f"… ({20_000 - CELL_CHARS:,} more characters)"
    assert f"payload={payload}" in out
    assert re.search(r"key=(k\\u\{202E\})+k?… \([\d,]+ more characters\)", out), out
    code, out, err = _run(["-o", "json", "topics", "peek-messages", TOPIC, "-s", "plain"])
    assert code == 0, err
    message = json.loads(out)[0]
    assert message["payload"] == "p" * 20_000
    assert message["key"] == "k\u202e" * 100


def test_columns_stay_aligned_after_an_escaped_or_wide_name(home: Path) -> None:
    code, out, err = _run(["topics", "analyze-backlog", TOPIC])
    assert code == 0, err
    assert not any(hidden_in(line) for line in out.splitlines())
    header, *rows = out.splitlines()[1:]
    tail = re.compile(r" +(\d+ +\d+ +\d+ +\d+ +\d+ +\S+ +\S+ +(?:yes|no))$")
    starts = set()
    for row in rows:
        found = tail.search(row)
        assert found is not None, row
        starts.add(columns(row[: found.start(1)]))
    assert starts == {columns(header[: header.index("entries")])}
    for name in NAMES:
        shown = legible(name)
        if len(shown) <= CELL_CHARS:
            assert shown in out
    assert "n" * CELL_CHARS + "… (140 more characters)" in out
    code, out, err = _run(["-o", "json", "topics", "analyze-backlog", TOPIC])
    assert code == 0, err
    assert set(json.loads(out)["subscriptions"]) == set(NAMES)


def _result(subscription: str) -> dict[str, object]:
    return {
        "topicPartition": "persistent://acme/ops/cut",
        "subscription": subscription,
        "entries": 2,
        "messages": 2,
        "filterAcceptedMessages": 2,
        "filterRejectedMessages": 0,
        "filterRescheduledMessages": 0,
        "firstMessageId": "1:0",
        "lastMessageId": "1:1",
        "aborted": False,
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(HOSTILE, min_size=1, max_size=4, unique=True))
def test_any_names_keep_the_table_aligned(names: list[str]) -> None:
    """The table alone, of hostile names: every row's next column starts where the
    header's does, in terminal columns, and nothing hidden is printed."""
    document = {
        "topic": "persistent://acme/ops/cut",
        "subscription": None,
        "partitions": [_result(name) for name in names],
        "subscriptions": {name: _result(name) for name in names},
        "total": _result("*"),
    }
    header, *rows = analysis_document_lines(document)[1:]
    start = columns(header[: header.index("entries")])
    for row in rows:
        assert not hidden_in(row)
        found = re.search(r" +(2 +2 +2 +0 +0 +1:0 +1:1 +no)$", row)
        assert found is not None, row
        assert columns(row[: found.start(1)]) == start
