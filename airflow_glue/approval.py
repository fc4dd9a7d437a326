"""``require_approval``: the check every irreversible task makes first.

It trusts neither the gate task's state (anyone who may trigger runs may mark
it success by hand) nor its XCom (anyone may post one). It re-reads the
approval record from Airflow's REST API, which only an assigned user can
write, once: ``GET /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{gate}/-1/hitlDetails``.
It answers with a read-only service account, the Airflow connection
``cursorops_airflow_api`` (host, port, login, password; a viewer suffices).

It refuses unless the record is an Approve, answered by a user other than the
requester whose Pulsar role may skip on the topic now, for the very plan being
applied (the plan digest written in the approval's body).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.errors import NotAuthorizedError

if TYPE_CHECKING:
    from core.broker import Broker

API_CONNECTION = "cursorops_airflow_api"
TIMEOUT_S = 30.0


def fetch_approval_record(dag_id: str, run_id: str, gate_task_id: str) -> dict[str, Any]:
    """The HITL record of the gate, from Airflow's REST API, as the service account."""
    from urllib.parse import quote

    import httpx
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(API_CONNECTION)
    scheme = conn.schema or "http"
    base = f"{scheme}://{conn.host}" + (f":{conn.port}" if conn.port else "")
    with httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
        token = client.post("/auth/token", json={"username": conn.login, "password": conn.password})
        token.raise_for_status()
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        path = (
            f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
            f"/taskInstances/{quote(gate_task_id, safe='')}/-1/hitlDetails"
        )
        response = client.get(path, headers=headers)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        return dict(response.json())


def check_approval(
    record: Mapping[str, Any],
    plan: Mapping[str, Any],
    requester: str | None,
    broker: Broker,
) -> dict[str, Any]:
    """Raise NotAuthorizedError unless ``record`` approves ``plan`` with four eyes."""
    from airflow_glue.environment import pulsar_role
    from airflow_glue.gate import may_skip
    from airflow_glue.plan import digest_in, skip_plan

    if not record or not record.get("response_received"):
        raise NotAuthorizedError("No approval on record: nobody answered the approval gate")
    chosen = record.get("chosen_options")
    if chosen != ["Approve"]:
        raise NotAuthorizedError(f"The approval gate was answered {chosen}, not Approve")
    approver = (record.get("responded_by_user") or {}).get("id")
    if not approver:
        raise NotAuthorizedError("The approval on record names no user")
    if not requester or approver == requester:
        raise NotAuthorizedError(
            f"Four eyes: the approval is by {approver}, the requester ({requester}) themselves"
        )
    role = pulsar_role(approver)
    topic = skip_plan(plan).topic
    if not may_skip(broker, role, topic):
        raise NotAuthorizedError(f"Approver {approver} (role '{role}') may not skip on {topic}")
    # Recomputed from the plan's content, never read from the document: the plan
    # travels as XCom, which anyone may post.
    applying = skip_plan(plan).plan_id
    seen = digest_in(record.get("body"))
    if seen != applying:
        raise NotAuthorizedError(
            f"The plan differs from the one approved (approved {seen}, applying {applying})"
        )
    return {"approver": approver, "approvedAt": record.get("responded_at")}


def require_approval(
    context: Mapping[str, Any], plan: Mapping[str, Any], broker: Broker, gate_task_id: str
) -> dict[str, Any]:
    """Re-read the approval from Airflow and check it; returns who approved and when."""
    dag_run = context["dag_run"]
    record = fetch_approval_record(dag_run.dag_id, dag_run.run_id, gate_task_id)
    return check_approval(record, plan, dag_run.triggering_user_name, broker)
