"""The REST load of ``benchmarks/rest_load.py``, small: 50 clients skip for 5 s while two
consumer processes acknowledge, on PostgreSQL; nothing acknowledged is lost and no
skipped message is delivered after its skip answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import _postgres_base_url

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]


def test_fifty_clients_skip_while_consumers_acknowledge(tmp_path: Path, monkeypatch) -> None:
    from benchmarks.rest_load import CLIENTS, QUICK, measure

    monkeypatch.setenv("CURSOROPS_TEST_PG_URL", _postgres_base_url())
    [results] = measure(QUICK, tmp_path, 1)
    assert results.failures == []
    assert results.violations == []
    assert CLIENTS == 50
    assert results.requests >= CLIENTS
    assert results.skipped > 0 and results.consumed > 0
    # Every message is accounted for: skipped, consumed, or still in the backlog.
    assert results.skipped + results.consumed + results.remaining >= QUICK.messages
