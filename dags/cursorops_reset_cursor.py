"""Reset a subscription's cursor, approved by a second person: ``reset-cursor`` where the
namespace requires approval.

A reset moves messages both ways: back, it redelivers everything after the target;
forward, it acknowledges everything before it. The plan resolves a time to one target
entry per partition when it is made, and shows each partition's backlog before and after.

Its runs are started by cursorops's doors, never by hand: a request made through REST,
the CLI (``--admin-url``) or the Cursors page, on a namespace that requires approval, is
planned once and stored as a plan record bound to a new run of this DAG, which the door
starts, as the requester, with the record's digest (``plan_digest``) as its one param.

approve_reset (four eyes; more gates when the quorum asks; the first loads the record by its
digest and refuses it unless it is bound to this very run and its requester) →
apply_reset (every partition in one transaction, with its audit record) → record.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag

from cursorops.airflow.gated_tail import approve_and_apply, request_params
from cursorops.core.services.gating.operation import RESET_CURSOR


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "reset", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params=request_params(),
)
def cursorops_reset_cursor() -> None:
    approve_and_apply(RESET_CURSOR)


cursorops_reset_cursor()
