"""``require_approvals``: the check every irreversible task makes first.

It trusts neither the gate task's state (anyone who may trigger runs may mark
it success by hand) nor its XCom (anyone may post one). It re-reads the
approval record from Airflow's REST API, which only an assigned user can
write, once: ``GET /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{gate}/-1/hitlDetails``.
It answers with a read-only service account, the Airflow connection
``cursorops_airflow_api`` (host, port, login, password; a viewer suffices).

It refuses unless each approval the plan needs is an Approve, answered by a
distinct assigned user other than the requester whose Pulsar role may skip on
the topic now, to a text the run's gate recorded it showed (by its SHA-256,
in cursorops's store, which no requester writes) for the run's current plan
record, and no older than its validity. Nothing is parsed out of the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from core.errors import NotAuthorizedError

if TYPE_CHECKING:
    from core.broker import Broker
    from core.skipping.plan_record import ApprovalRequest, PlanRecord

API_CONNECTION = "cursorops_airflow_api"
TIMEOUT_S = 30.0


@contextmanager
def _service_client() -> Iterator[Any]:
    """An httpx client on Airflow's API server, logged in as the service account."""
    import httpx
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(API_CONNECTION)
    scheme = conn.schema or "http"
    base = f"{scheme}://{conn.host}" + (f":{conn.port}" if conn.port else "")
    with httpx.Client(base_url=base, timeout=TIMEOUT_S) as client:
        token = client.post("/auth/token", json={"username": conn.login, "password": conn.password})
        token.raise_for_status()
        client.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        yield client


def fetch_approval_record(dag_id: str, run_id: str, gate_task_id: str) -> dict[str, Any]:
    """The HITL record of the gate, from Airflow's REST API, as the service account."""
    with _service_client() as client:
        path = (
            f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
            f"/taskInstances/{quote(gate_task_id, safe='')}/-1/hitlDetails"
        )
        response = client.get(path)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        return dict(response.json())


def refresh_gate_text(dag_id: str, run_id: str, gate_task_id: str) -> None:
    """Have the plugin set the starting gate's HITL record to the text the gate recorded
    (:mod:`cursorops_api.gates`: Airflow keeps a cleared gate's first text otherwise)."""
    from airflow_glue.environment import PLUGIN_PREFIX

    with _service_client() as client:
        path = (
            f"{PLUGIN_PREFIX}/gates/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"
            f"/{quote(gate_task_id, safe='')}/refresh"
        )
        client.post(path).raise_for_status()


def _ms(when: object) -> int | None:
    from datetime import datetime

    if not isinstance(when, str):
        return None
    try:
        return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def check_approvals(
    answers: Mapping[str, Mapping[str, Any]],
    requests: Sequence[ApprovalRequest],
    record: PlanRecord,
    requester: str | None,
    may_skip: Callable[[str], bool],
    now_ms: int,
) -> list[dict[str, Any]]:
    """Raise NotAuthorizedError unless ``answers`` hold the approvals ``record`` needs.

    ``answers`` are the HITL records of the run's gates, in gate order, as Airflow
    stores them; ``requests`` what those gates recorded they showed. Each of the
    first ``record.required_approvals`` gates must hold an Approve, by a distinct
    user who is not the requester, was assigned, and may skip on the topic now, given
    to a text a gate of this run recorded (its SHA-256) for this very plan digest,
    and not older than that presentation's validity. Returns who approved, when.
    """
    from airflow_glue.gate import body_sha256

    gates = list(answers)
    if len(gates) < record.required_approvals:
        raise NotAuthorizedError(
            f"Plan {record.digest} needs {record.required_approvals} approvals; this workflow "
            f"has {len(gates)} gate(s)"
        )
    if not requester or requester != record.binding.requester:
        raise NotAuthorizedError(
            f"The run's requester ({requester}) is not the plan's ({record.binding.requester})"
        )
    approved: list[dict[str, Any]] = []
    for gate in gates[: record.required_approvals]:
        answer = answers[gate]
        where = f"approval gate {gate}"
        if not answer or not answer.get("response_received"):
            raise NotAuthorizedError(f"No approval on record: nobody answered the {where}")
        chosen = answer.get("chosen_options")
        if chosen != ["Approve"]:
            raise NotAuthorizedError(f"The {where} was answered {chosen}, not Approve")
        approver = (answer.get("responded_by_user") or {}).get("id")
        if not approver:
            raise NotAuthorizedError(f"The approval on record at {where} names no user")
        if approver == requester:
            raise NotAuthorizedError(
                f"Four eyes: the approval is by {approver}, the requester ({requester}) themselves"
            )
        if approver in {a["approver"] for a in approved}:
            raise NotAuthorizedError(f"{approver} approved twice: the approvals must be distinct")
        seen = body_sha256(str(answer.get("body") or ""))
        shown = [r for r in requests if r.gate == gate and r.body_sha256 == seen]
        if not shown:
            raise NotAuthorizedError(
                f"The text approved at {where} is not one this run's gate showed: nothing applied"
            )
        request = shown[-1]
        if request.digest != record.digest:
            raise NotAuthorizedError(
                f"The plan differs from the one approved (approved {request.digest}, "
                f"the run's plan is {record.digest})"
            )
        if approver not in request.approvers:
            raise NotAuthorizedError(f"{approver} was not assigned the {where}")
        at = _ms(answer.get("responded_at"))
        if at is None or at < request.presented_at_ms - 1000:
            raise NotAuthorizedError(f"The approval at {where} has no valid answer time")
        if now_ms - at > request.valid_for_ms:
            raise NotAuthorizedError(
                f"The approval by {approver} at {answer.get('responded_at')} expired: approvals "
                f"stay valid for {request.valid_for_ms // 60_000} min; ask again"
            )
        if not may_skip(approver):
            raise NotAuthorizedError(
                f"Approver {approver} may not skip on {' and '.join(record.topics())}"
            )
        approved.append(
            {"approver": approver, "approvedAt": answer.get("responded_at"), "gate": gate}
        )
    return approved


def require_approvals(
    context: Mapping[str, Any], record: PlanRecord, broker: Broker, gates: Sequence[str]
) -> list[dict[str, Any]]:
    """Re-read every gate's answer from Airflow and check them; who approved and when."""
    from airflow_glue.environment import pulsar_role
    from airflow_glue.gate import may_skip
    from core.broker import wall_clock_ms

    dag_run = context["dag_run"]
    answers = {g: fetch_approval_record(dag_run.dag_id, dag_run.run_id, g) for g in gates}
    topics = record.topics()
    return check_approvals(
        answers,
        broker.approval_requests(dag_run.dag_id, dag_run.run_id),
        record,
        dag_run.triggering_user_name,
        lambda user: all(may_skip(broker, pulsar_role(user), t) for t in topics),
        wall_clock_ms(),
    )
