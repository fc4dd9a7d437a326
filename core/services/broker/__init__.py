"""The façade every front door calls: CLI, REST plugin, Airflow tasks.

A :class:`Broker` owns the two stores and the collaborators that answer admin and client
operations with Pulsar's semantics, checking the caller's role first. It holds no cursor
state between calls: each call loads what it needs from the stores, so several processes
may share one installation.

Its own methods are the doors of every gated operation (an operation that moves or
removes a subscription's cursor for good, listed in :mod:`cursorops.core.services.gating.registry`):

- :meth:`Broker.request` asks for one. Whether approval is needed is decided once, from
  the namespace policies of the topics the request would move cursors on (authorized
  first): without, it is applied at once with its audit record
  (:class:`~cursorops.core.services.gating.operation.Applied`); with, it is planned once and
  stored as a plan record bound to a new run, recorded as planned, and the run is
  started by the door's :class:`~cursorops.core.services.gating.operation.RunStarter`
  (:class:`~cursorops.core.services.gating.operation.Pending`).
- :meth:`Broker.preview_request` plans one as a request would and stores nothing.
- :meth:`Broker.plan_request` plans one into the plan record of a run that is already
  going (a workflow that plans in its own first step).
- :meth:`Broker.apply_approved_plan` applies an approved record: the registry's entry for
  the operation the record stores (which its digest covers, so nothing a requester wrote
  chooses it) applies it, committing the change, its audit record and the record's claim
  (applied at most once) in one transaction.

Everything else is asked of the collaborator that owns it, an attribute of the Broker
(where the methods are documented): ``broker.admin.create_topic(...)``,
``broker.reading.consume(...)``, ``broker.workflow.approval_answers(...)``.

======================  =====================  =============================================
attribute               module                 what it owns
======================  =====================  =============================================
``access``              ``access.py``          the authorization decision, the approval refusal
``admin``               ``admin.py``           tenants, namespaces, policies, topics, subscriptions
``deletion``            ``deletion.py``        deleting tenants, namespaces and topics
``producing``           ``produce.py``         produce, produce as columns, append entries
``reading``             ``read.py``            dispatcher, consume, peek, examine, last position
``gated``               ``gated.py``           what the gated operations plan and apply through
``analysis``            ``analysis.py``        backlog, stats, cursor state, history, Spark reads
``workflow``            ``workflow.py``        plan records, approval requests, the audit log
``schemas``             ``schemas.py``         schema versions, compatibility strategy
``policies``            ``policies.py``        deduplication, automatic topic creation
``compaction``          ``compaction.py``      compaction horizons, the compacted view
``cluster``             ``cluster.py``         the cluster's brokers and their leases
======================  =====================  =============================================

The gated operations' own functions (a skip's plan, a seek, an unsubscribe, the list of
applied skips) take the ``gated`` collaborator first:
``unsubscribe.delete_subscription(broker.gated, role, topic, subscription)``.

They share one :class:`~cursorops.core.services.broker.context.BrokerContext` (``context``): the
configuration, the clock, the stores and the authorization.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError, PlanAlreadyAppliedError
from cursorops.core.domain.plans.plan_record import PlanBinding, PlanRecord
from cursorops.core.services.broker.access import Access
from cursorops.core.services.broker.admin import Admin
from cursorops.core.services.broker.analysis import (
    PAYLOAD_EXCERPT_BYTES,
    Analysis,
    BacklogProjection,
    MessageDescription,
    PartitionProjection,
)
from cursorops.core.services.broker.backlog_table import BacklogTable
from cursorops.core.services.broker.cluster import Cluster
from cursorops.core.services.broker.compaction import Compaction
from cursorops.core.services.broker.context import BrokerContext, wall_clock_ms
from cursorops.core.services.broker.deletion import Deletion
from cursorops.core.services.broker.gated import GatedOperations
from cursorops.core.services.broker.policies import Policies
from cursorops.core.services.broker.produce import Producing
from cursorops.core.services.broker.read import Reading
from cursorops.core.services.broker.schemas import Schemas
from cursorops.core.services.broker.workflow import Workflow
from cursorops.core.services.gating.operation import (
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatedOperation,
    Pending,
    Planned,
    Run,
    RunStarter,
)
from cursorops.core.services.gating.registry import named, recorded, verified_plan
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.ledger_root import open_ledger_root
from cursorops.core.store.metadata import AuditRecord, MetadataStore

if TYPE_CHECKING:
    from cursorops.core.store.migrate import Migration

__all__ = [
    "PAYLOAD_EXCERPT_BYTES",
    "AuditRecord",
    "BacklogProjection",
    "Broker",
    "BrokerContext",
    "MessageDescription",
    "PartitionProjection",
    "PlannedRequest",
    "new_run_id",
    "wall_clock_ms",
]


def new_run_id(at_ms: int) -> str:
    """A run id for a request's run, chosen before its plan record binds it: the time it was
    asked and a random part (two requests in one millisecond get two runs)."""
    at = datetime.fromtimestamp(at_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"request__{at}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class PlannedRequest:
    """What a request would do, planned as :meth:`Broker.request` plans it and stored
    nowhere: the plan, its preview document, and whether it waits for an approval (else
    applying it is at once)."""

    planned: Planned[Any]
    approval_required: bool


def _require_reason(entry: GatedOperation[Any, Any], arguments: GatedArguments) -> None:
    if not arguments.reason:
        raise InvalidArgumentError(
            f"A reason is required: {entry.name} on {arguments.topic} waits for a second "
            "person's approval, who reads it; nothing requested"
        )


class Broker:
    def __init__(self, config: Config, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock
        # The ledger root first: a root that cannot be served is refused before the
        # metadata store is opened (or created).
        ledger_root = open_ledger_root(config.ledger_root)
        self.metadata = MetadataStore.from_config(config)
        self.ledgers = LedgerStore(ledger_root, self.metadata, config.max_entries_per_ledger)
        self.access = Access(config, self.metadata)
        self.context = BrokerContext(config, clock, self.metadata, self.ledgers, self.access)
        self.analysis = Analysis(self.context)
        self.admin = Admin(self.context)
        self.deletion = Deletion(self.context)
        self.producing = Producing(self.context, self.admin)
        self.reading = Reading(self.context)
        self.backlog = BacklogTable(self.context, self.reading)
        self.workflow = Workflow(self.context)
        self.gated = GatedOperations(self.context, self.analysis)
        self.schemas = Schemas(self.context)
        self.policies = Policies(self.context)
        self.compaction = Compaction(self.context)
        self.cluster = Cluster(config, self.metadata, clock, self.access)

    @staticmethod
    def migrate_metadata(config: Config) -> Migration:
        """Upgrade the metadata store ``config`` names to this release's schema; idempotent.

        What ``cursorops db migrate`` runs, without opening a Broker (an open of a
        shared store that is behind is refused). Not authorized by role: whoever
        holds the store's URL and credentials may change its schema.
        """
        from cursorops.core.store.migrate import migrate

        return migrate(config)

    def close(self) -> None:
        """Stop this broker: a broker that joined a cluster leaves it (:meth:`Cluster.leave`),
        then the metadata store closes and, on PostgreSQL, gives up the broker's life lock.
        A leave the store refuses (this life already fenced off by a newer one) still closes
        the store."""
        try:
            self.cluster.leave()
        finally:
            self.metadata.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self, operation: str, caller: Caller, arguments: GatedArguments, runs: RunStarter
    ) -> Applied | Pending:
        """Ask for ``operation`` (``skip-messages``, ``reset-cursor``, ...) as ``caller``.

        Where no namespace of the request's topics requires approval, it is applied at
        once with its audit record (:class:`Applied`). Where one does, it is planned once
        and stored as a plan record bound to a new run of the operation's workflow,
        recorded as planned on each topic, and ``runs`` starts that run with the record's
        digest as the requester (:class:`Pending`); nothing else is changed. A reason is
        required there, and ``runs`` is asked whether the requester may start the workflow
        before anything is planned. A run that does not start closes the request (a
        ``not-started`` closing record) and raises what the start raised. Bad arguments
        are refused before anything is read or stored.
        """
        entry = named(operation)
        checked = entry.check(arguments)
        targets = entry.targets(self.gated, caller.role, checked)
        if not any(info.approval_required for info in targets):
            return entry.apply_now(self.gated, caller, checked)
        _require_reason(entry, checked)
        # Whether the requester may start the workflow at all: asked before anything is
        # planned or stored, so a refusal leaves nothing behind.
        runs.authorize(entry.workflow, caller.requester)
        run = Run(entry.workflow, new_run_id(self.clock()))
        record = self._plan_and_store(entry, caller, checked, run)
        try:
            started = runs.start(run, record.digest, caller.requester)
        except Exception as exc:
            # Stored and recorded as planned, never started: closed, so it does not stay
            # listed as waiting, and a run that starts after all refuses it.
            self.workflow.close_unstarted(record, str(exc) or type(exc).__name__)
            raise
        return Pending(record, started)

    def preview_request(
        self, operation: str, caller: Caller, arguments: GatedArguments
    ) -> PlannedRequest:
        """Plan ``operation`` as :meth:`request` would, as ``caller``, and change nothing:
        no plan record, no run, no audit record. Authorized and checked as the request is;
        the reason is not required (a preview is what a person reads before giving one).
        Applying may still differ: the request plans again from the cursor as it is then."""
        entry = named(operation)
        checked = entry.check(arguments)
        targets = entry.targets(self.gated, caller.role, checked)
        planned = entry.plan(self.gated, caller, checked)
        return PlannedRequest(planned, any(info.approval_required for info in targets))

    def plan_request(
        self, operation: str, caller: Caller, arguments: GatedArguments, run: Run
    ) -> PlanRecord:
        """Plan ``operation`` once and store it as the plan record of ``run`` (a run that is
        already going: a workflow that plans in its own first step), recorded as planned;
        nothing else is changed."""
        entry = named(operation)
        checked = entry.check(arguments)
        _require_reason(entry, checked)
        return self._plan_and_store(entry, caller, checked, run)

    def _plan_and_store(
        self,
        entry: GatedOperation[Any, Any],
        caller: Caller,
        arguments: GatedArguments,
        run: Run,
    ) -> PlanRecord:
        planned = entry.plan(self.gated, caller, arguments)
        binding = PlanBinding(
            run.dag_id, run.run_id, caller.requester, caller.role, entry.recorded_as
        )
        return self.workflow.save_plan_record(binding, planned.plan, planned.document)

    def apply_approved_plan(
        self,
        record: PlanRecord,
        approvals: Sequence[Mapping[str, object]],
        *,
        via: str = "airflow",
    ) -> Applied:
        """Apply ``record`` (its approvals checked by the caller: who, when, for this digest)
        as its requester's role, by the operation it stores."""
        plan = verified_plan(record)
        if record.applied_at_ms is not None:
            raise PlanAlreadyAppliedError(
                f"Plan {record.digest} was applied already (a plan is applied at most once)"
            )
        approval = Approval(record, tuple(str(a.get("approver")) for a in approvals), via)
        return recorded(record.operation).apply_approved(self.gated, plan, approval)
