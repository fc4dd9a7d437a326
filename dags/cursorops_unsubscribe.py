"""Unsubscribe, approved by a second person: ``topics unsubscribe`` where the namespace
requires approval.

An unsubscribe drops the backlog with the subscription, and a subscription gone for a
while misses what is published meanwhile. The preview shows what is dropped, per
partition.

Its runs are started by cursorops's doors, never by hand: a request made through REST,
the CLI (``--admin-url``) or the Cursors page, on a namespace that requires approval, is
planned once and stored as a plan record bound to a new run of this DAG, which the door
starts, as the requester, with the record's digest (``plan_digest``) as its one param.

approve_unsubscribe (four eyes; more gates when the quorum asks; the first loads the record by its
digest and refuses it unless it is bound to this very run and its requester) →
apply_unsubscribe (the subscription and its audit record, one transaction) → record.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag

from cursorops.airflow.gated_tail import approve_and_apply, request_params
from cursorops.core.services.gating.operation import UNSUBSCRIBE


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "unsubscribe", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params=request_params(),
)
def cursorops_unsubscribe() -> None:
    approve_and_apply(UNSUBSCRIBE)


cursorops_unsubscribe()
