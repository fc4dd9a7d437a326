"""Request bodies at the boundary (pydantic, ``extra="forbid"``) and the 202 answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_INT64_MAX = 2**63 - 1


class MessageIdBody(BaseModel):
    """Pulsar's ``MessageIdImpl`` JSON, the start of a new subscription.

    ``(-1, -1)`` is earliest and ``(2**63-1, 2**63-1)`` latest, as in Pulsar.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    ledger_id: int = Field(alias="ledgerId", ge=-1, le=_INT64_MAX)
    entry_id: int = Field(alias="entryId", ge=-1, le=_INT64_MAX)
    partition_index: int = Field(-1, alias="partitionIndex", ge=-1, le=2**31 - 1)


class SkipTriggered(BaseModel):
    """202: the request waits for an approval in its workflow's run (its plan record stored,
    the run started with the record's digest)."""

    model_config = ConfigDict(populate_by_name=True)

    dag_id: str = Field(alias="dagId")
    run_id: str = Field(alias="runId")
    url: str
    """The approval itself in Airflow's UI (the run's first gate; it appears once planned)."""
    run_url: str = Field(alias="runUrl")
    """The run in Airflow's UI."""
    plan_digest: str = Field(alias="planDigest")
    """The plan record's digest: the identifier the approver reads, and the audit names."""
