"""A request record: a gated request as it was asked, stored before anything is planned.

Most gated requests are planned at their door and stored as a plan record in the same
call. A workflow that plans in a step of its own (skip matching: a Spark scan comes
first) is started with the request itself, from Airflow's trigger form or REST API. Its
first task checks the request and stores it here, once for its run. Every later task,
and the Spark job, reads the request from the store by the identity of its own run
(``dag_id``, ``run_id``). None of them reads it from an XCom, the run's conf or an
Airflow variable, because the people a gate guards against can write all three. The
plan record made after the scan names this record's digest in its document
(``request``), so the approved plan is chained to the request that was asked.

A record is:

- **bound**: to the run, the requester (the run's triggering user) and the Pulsar role
  they act as;
- **one per run**: the store refuses a second, different record for the same run, and
  storing the same request again returns the stored one (so a first task that is
  cleared and run again changes nothing);
- **content-addressed**: :attr:`RequestRecord.digest` is the SHA-256 of the binding and
  the arguments. The time it was stored is left out, so storing the same request again
  gives the same digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cursorops.core.domain.errors import InvalidArgumentError, NotAuthorizedError
from cursorops.core.domain.portable_plan import canonical_json


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"Invalid request record: {what} must be a non-empty text")
    return value


@dataclass(frozen=True)
class RequestRecord:
    """One stored request. Build new ones with :meth:`create`; the store gives them back."""

    operation: str
    """The gated operation asked for (``skip-matching``)."""
    dag_id: str
    run_id: str
    requester: str
    role: str
    topic: str
    subscription: str
    arguments: Mapping[str, Any]
    """What the operation needs besides the topic and subscription, as JSON (for
    skip-matching: the predicate document, reason, ticket, limit, allowLarge)."""
    created_at_ms: int
    digest: str

    @classmethod
    def create(
        cls,
        *,
        operation: str,
        dag_id: str,
        run_id: str,
        requester: str,
        role: str,
        topic: str,
        subscription: str,
        arguments: Mapping[str, Any],
        created_at_ms: int,
    ) -> RequestRecord:
        """A new record, its digest computed here (never taken from anyone)."""
        try:
            spelled = canonical_json(dict(arguments))
            spelled.encode("utf-8")
            kept = json.loads(spelled)
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                "Invalid request: text that is not Unicode (a lone surrogate, "
                f"{exc.object[exc.start : exc.end]!r})"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"Invalid request: not JSON: {exc}") from exc
        fields: dict[str, Any] = {
            "operation": _text(operation, "operation"),
            "dag_id": _text(dag_id, "dag id"),
            "run_id": _text(run_id, "run id"),
            "requester": _text(requester, "requester"),
            "role": _text(role, "role"),
            "topic": _text(topic, "topic"),
            "subscription": _text(subscription, "subscription"),
            "arguments": kept,
        }
        return cls(**fields, created_at_ms=created_at_ms, digest=_digest(fields))

    def verified(self) -> RequestRecord:
        """This record, after checking that its digest matches its content."""
        expected = _digest({name: getattr(self, name) for name in _SPELLED})
        if expected != self.digest:
            raise InvalidArgumentError(
                f"Request record {self.digest} does not match its content: refused"
            )
        return self

    def bound_to(self, dag_id: str, run_id: str, requester: str | None) -> RequestRecord:
        """This record (verified). Refused (NotAuthorizedError) unless it is bound to the run
        (``dag_id``, ``run_id``) and to ``requester``, the run's triggering user."""
        self.verified()
        if (self.dag_id, self.run_id) != (dag_id, run_id):
            raise NotAuthorizedError(
                f"Request {self.digest} is bound to run {self.run_id} of {self.dag_id}, "
                f"not to run {run_id}: refused"
            )
        if not requester or requester != self.requester:
            raise NotAuthorizedError(
                f"Request {self.digest} was asked for by {self.requester}, not by this "
                f"run's requester ({requester}): refused"
            )
        return self


_SPELLED = {
    "operation": "operation",
    "dag_id": "dagId",
    "run_id": "runId",
    "requester": "requester",
    "role": "role",
    "topic": "topic",
    "subscription": "subscription",
    "arguments": "arguments",
}
"""The content a digest covers: each field and its name in the hashed JSON."""


def _digest(content: Mapping[str, Any]) -> str:
    body = {spelled: content[name] for name, spelled in _SPELLED.items()}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


__all__ = ["RequestRecord"]
