"""Redrive a subscription's dead-letter topic to that subscription alone, approved by a second
person: ``topics redrive`` where the topic's or the dead-letter topic's namespace
requires approval (the stricter policy counts).

Apply publishes the planned messages back to the topic with their keys and properties
(plus provenance properties), and in the same transaction acknowledges them on every
other subscription of the topic and on the dead-letter topic's subscriptions: only the
failing subscription sees them again.

Its runs are started by cursorops's doors, never by hand: a request made through REST,
the CLI (``--admin-url``) or the Cursors page, on a namespace that requires approval, is
planned once and stored as a plan record bound to a new run of this DAG, which the door
starts, as the requester, with the record's digest (``plan_digest``) as its one param.

approve_redrive (four eyes; more gates when the quorum asks; the first loads the record by its
digest and refuses it unless it is bound to this very run and its requester) →
apply_redrive (one transaction, recorded on both topics) → record.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag

from cursorops.airflow.gated_tail import approve_and_apply, request_params
from cursorops.core.services.gating.operation import REDRIVE


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "redrive", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params=request_params(),
)
def cursorops_redrive() -> None:
    approve_and_apply(REDRIVE)


cursorops_redrive()
