"""Skip the head of a subscription's backlog: ``skip -n N`` or ``clear-backlog``, approved by a
second person.

N counts messages, not entries as Pulsar's ``skip -n`` does: a batch of 100 is 100
messages; each partition skips its own N, as pulsar-admin's does on a partitioned topic.
Any subscription type. The plan names the very messages the approver sees: apply
acknowledges those, never the messages that arrived after planning.

Its runs are started by cursorops's doors, never by hand: a request made through REST,
the CLI (``--admin-url``) or the Cursors page, on a namespace that requires approval, is
planned once and stored as a plan record bound to a new run of this DAG, which the door
starts, as the requester, with the record's digest (``plan_digest``) as its one param.

approve_skip (four eyes; more gates when the quorum asks; the first loads the record by its
digest and refuses it unless it is bound to this very run and its requester) →
apply_skip (the planned messages, in one transaction) → record.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag

from cursorops.airflow.gated_tail import approve_and_apply, request_params
from cursorops.core.services.gating.operation import SKIP


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["cursorops", "skip", "approval"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    max_active_tasks=4,
    doc_md=__doc__,
    params=request_params(),
)
def cursorops_skip_head() -> None:
    approve_and_apply(SKIP)


cursorops_skip_head()
