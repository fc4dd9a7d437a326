"""The minute of the gates' params lasts 60 s unless the deployment's environment says
otherwise (the session Airflow of the tests: ``tests/airflow_fixtures.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest


def test_a_minute_lasts_what_the_deployment_says(monkeypatch: pytest.MonkeyPatch):
    from cursorops.airflow.operators.gate import MINUTE_ENV, _readable, approval_minute

    monkeypatch.delenv(MINUTE_ENV, raising=False)
    assert approval_minute() == timedelta(minutes=1)
    monkeypatch.setenv(MINUTE_ENV, " 10 ")
    assert approval_minute() == timedelta(seconds=10)
    assert _readable(approval_minute() * 10) == "100 s"
    assert _readable(approval_minute() * 24 * 60) == "4 h"
    assert _readable(timedelta(minutes=90)) == "90 min"


@pytest.mark.parametrize("raw", ["0", "0.5", "61", "-10", "ten", "nan", "inf", "1e9"])
def test_a_bad_minute_fails_the_gate_with_its_name(monkeypatch: pytest.MonkeyPatch, raw: str):
    from airflow.sdk.exceptions import AirflowFailException

    from cursorops.airflow.operators.gate import MINUTE_ENV, approval_minute

    monkeypatch.setenv(MINUTE_ENV, raw)
    with pytest.raises(AirflowFailException, match=f"{MINUTE_ENV} must be 1 to 60 seconds"):
        approval_minute()


def test_no_run_param_sets_the_minute():
    """The run's params set how many minutes, never how long one lasts: a requester cannot
    shorten an approval window below a minute of the deployment."""
    from cursorops.airflow.operators.gate import GATE_PARAMS, MINUTE_ENV, gate_params

    params = gate_params()
    assert set(params) == GATE_PARAMS
    assert MINUTE_ENV not in str(params)
    assert all(param.schema["minimum"] == 1 for param in params.values())
