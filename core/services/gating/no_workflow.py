"""The run starter of a door with no workflow system behind it.

A request that waits for a second person's approval needs a workflow (Airflow) to wait
in. Where none is configured (the home's own standalone, reached through its private
socket, without ``AIRFLOW__API__BASE_URL``) it is refused before anything is planned or
stored, and the refusal says where to ask instead.
"""

from __future__ import annotations

from cursorops.core.domain.errors import ApprovalRequiredError
from cursorops.core.services.gating.operation import Run


class NoWorkflow:
    """Refuses every run: :meth:`authorize` raises ApprovalRequiredError."""

    def authorize(self, workflow: str, requester: str) -> None:
        raise ApprovalRequiredError(
            f"The namespace requires a second person's approval: nothing applied. Ask "
            f"through --admin-url: the deployment starts the {workflow} workflow as you"
        )

    def start(self, run: Run, digest: str, requester: str) -> Run:
        raise AssertionError("authorize refuses every run")  # pragma: no cover
