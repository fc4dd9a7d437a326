"""The answer Airflow holds for a gate's task instance, read where Airflow lets it be read.

Airflow 3.3 can fail a gate it has just resumed with an answer: the answer lands between the
workload that parked the gate and the scheduler's processing of that workload's end, and the
late "success" reads as a task killed outside Airflow. The answer stays on the task
instance's HITL record, but a task cannot read that record (its supervisor forwards no such
request; only the triggerer's does), and asking for the record anew (what a gate does when
it shows its request) erases the answer. So the retried gate defers to this trigger, which
reads the record once through the triggerer and fires with what it holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from airflow.triggers.base import BaseTrigger, TriggerEvent

HELD = "held"
"""The event's key: the answer as the gate's event, or None when Airflow holds none."""


def held_event(held: Any) -> dict[str, Any] | None:
    """A HITL record's answer as the event a resumed gate completes with, or None when it
    holds no answer. Only an assigned user writes one, through Airflow's API; the gates set
    no default, so no timeout writes one."""
    if not (held.response_received and held.chosen_options and held.responded_at):
        return None
    by = held.responded_by_user
    return {
        "chosen_options": list(held.chosen_options),
        "params_input": held.params_input or {},
        "responded_at": held.responded_at,
        "responded_by_user": None if by is None else {"id": by.id, "name": by.name},
        "timedout": False,
    }


class HeldAnswerTrigger(BaseTrigger):
    """Fires once with the answer Airflow holds for task instance ``ti_id`` (or None)."""

    def __init__(self, ti_id: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ti_id = ti_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.HeldAnswerTrigger", {"ti_id": self.ti_id})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow.sdk.exceptions import AirflowRuntimeError
        from airflow.sdk.execution_time.hitl import get_hitl_detail_content_detail
        from asgiref.sync import sync_to_async

        try:
            held = await sync_to_async(get_hitl_detail_content_detail)(ti_id=UUID(self.ti_id))
        except AirflowRuntimeError:
            # No HITL record: this task never asked.
            yield TriggerEvent({HELD: None})  # type: ignore[no-untyped-call]
            return
        yield TriggerEvent({HELD: held_event(held)})  # type: ignore[no-untyped-call]
