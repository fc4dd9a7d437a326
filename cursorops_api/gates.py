"""Setting a starting approval gate's text in Airflow from what cursorops recorded.

Airflow 3.3 keeps a gate's first approval request when the gate is cleared and
runs again: its HITL record follows the task instance to its new try (the
foreign key cascades on update) and the new try only clears the answer, so the
approver would read the first run's preview and the first run's approvers.
The gate, just before it waits, asks this route to set the record's subject,
text and assignees to those it recorded in cursorops's store for this run and
gate (and to clear any earlier answer, as Airflow does for a new try).

Nothing in the request decides the content: it names a run and a gate, and
the text comes from the store. Only a gate that is running (starting to wait)
is touched, so an answer already given to a waiting gate can never be wiped.
The route runs in Airflow's API server, which owns Airflow's database.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response

from cursorops_api.deps import BrokerDep, GetUser

router = APIRouter(tags=["cursorops extensions"])

Name = Annotated[str, Path(min_length=1, max_length=250)]


@router.post("/gates/{dag_id}/{run_id}/{task_id}/refresh", status_code=204)
def refresh_gate(
    dag_id: Name, run_id: Name, task_id: Name, broker: BrokerDep, _user: GetUser
) -> Response:
    """Set the running gate's HITL record to the text the gate recorded last (204), or
    leave it when the gate has none yet (Airflow creates it from the gate's text)."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    shown = [r for r in broker.approval_requests(dag_id, run_id) if r.gate == task_id]
    if not shown:
        raise HTTPException(404, f"Gate {task_id} of run {run_id} recorded no approval request")
    latest = shown[-1]
    with create_session() as session:
        ti = session.scalar(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id == task_id,
                TaskInstance.map_index == -1,
            )
        )
        if ti is None or ti.state != TaskInstanceState.RUNNING:
            raise HTTPException(
                409, f"Gate {task_id} of run {run_id} is not starting: its text stays as it is"
            )
        detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
        if detail is not None:
            detail.subject = latest.subject
            detail.body = latest.body
            detail.assignees = [{"id": user, "name": user} for user in latest.approvers]
            detail.responded_by = None
            detail.responded_at = None
            detail.chosen_options = None
            detail.params_input = {}
    return Response(status_code=204)
