"""Undo an applied skip, approved by a second person: ``topics undo-skip`` where the namespace
requires approval.

Apply unacknowledges exactly the messages that skip acknowledged and that are still
acknowledged, so they are delivered again; nothing else changes. A skip is undone at most
once, and only while its ledgers are retained.

Its runs are started by cursorops's doors, never by hand: a request made through REST,
the CLI (``--admin-url``) or the Cursors page, on a namespace that requires approval, is
planned once and stored as a plan record bound to a new run of this DAG, which the door
starts, as the requester, with the record's digest (``plan_digest``) as its one param.

approve_undo_skip (four eyes; more gates when the quorum asks; the first loads the record by its
digest and refuses it unless it is bound to this very run and its requester) →
apply_undo_skip (the undo and its audit record, one transaction) → record.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag

from cursorops.airflow.gated_tail import approve_and_apply, request_params
from cursorops.core.services.gating.operation import UNDO_SKIP


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "undo", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params=request_params(),
)
def cursorops_undo_skip() -> None:
    approve_and_apply(UNDO_SKIP)


cursorops_undo_skip()
