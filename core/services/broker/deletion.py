"""Deleting tenants, namespaces and topics, with pulsar-admin's rules.

- A tenant is deleted by a superuser, once it has no namespace; a namespace by its
  tenant's admins, once it has no topic (Pulsar's 409 "Cannot delete non empty
  namespace"). Neither is audited: creating them is not either, and neither holds a
  cursor.
- A topic is deleted by its tenant's admins with its subscriptions and its data, refused
  while a consumer is connected unless ``force`` (Pulsar's 412 "Topic has active
  producers/subscriptions"). Each subscription removed with it gets an ``unsubscribe``
  audit record, as ``topics unsubscribe`` writes, so its name keeps its history (created
  again, it starts at the latest message only where the namespace requires approval),
  and the topic a ``delete-topic`` record.
- Where the namespace requires approval, a topic that has subscriptions is refused,
  forced or not: deleting it would drop their backlogs without the approval an
  unsubscribe needs. Each is unsubscribed through the ``cursorops_unsubscribe``
  workflow first; a topic without subscriptions holds no cursor and is deleted at once.
"""

from __future__ import annotations

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import ApprovalRequiredError, InvalidArgumentError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker.context import Collaborator
from cursorops.core.services.broker.schemas import schema_id
from cursorops.core.store.cursor_ticket import Ticket
from cursorops.core.store.metadata import AuditEntry
from cursorops.core.store.values import TopicInfo


class Deletion(Collaborator):
    """``tenants delete``, ``namespaces delete``, ``topics delete`` and
    ``topics delete-partitioned-topic``, each authorized first."""

    def delete_tenant(self, role: str, tenant: str) -> None:
        self.access.check(role, Operation.DELETE_TENANT, tenant, f"deleting tenant {tenant}")
        self.metadata.delete_tenant(tenant)

    def delete_namespace(self, role: str, namespace: str) -> None:
        tenant, _, local = namespace.partition("/")
        if not tenant or not local or "/" in local:
            raise InvalidArgumentError(
                f"Invalid namespace {namespace!r}: expected tenant/namespace"
            )
        self.access.check(
            role, Operation.DELETE_NAMESPACE, tenant, f"namespace {namespace}", namespace
        )
        self.metadata.delete_namespace(namespace)

    def delete_topic(
        self,
        role: str,
        topic: str | TopicName,
        *,
        partitioned: bool,
        force: bool = False,
        via: str = "broker",
    ) -> list[str]:
        """Delete a non-partitioned topic (``partitioned`` False) or a partitioned one
        (True, every partition) with its subscriptions and data; the subscriptions it had.

        Refused (nothing changed) when the kind does not match, while a consumer is
        connected unless ``force``, and where the namespace requires approval while any
        subscription is left."""
        info = self.access.authorized_topic(role, Operation.DELETE_TOPIC, topic)
        _check_kind(info, partitioned)
        name = TopicName.parse(info.name)
        at_ms = self.clock()
        # Said first with the way through the gate; the cursor door refuses it anyway (and
        # audits it) should a subscription come meanwhile.
        left = [] if not info.approval_required else self.metadata.list_subscriptions(info.name)
        if left:
            shown = ", ".join(repr(sub.name) for sub in left[:3]) + (
                ", ..." if len(left) > 3 else ""
            )
            raise ApprovalRequiredError(
                f"Namespace {name.namespace_name} requires a second person's approval to "
                f"drop a subscription's backlog, and {info.name} has {len(left)} "
                f"subscription(s) ({shown}): nothing deleted. Unsubscribe each through "
                "the cursorops_unsubscribe workflow (topics unsubscribe with --admin-url, "
                "or REST DELETE .../subscription/NAME, which answers 202), then delete "
                "the topic"
            )
        with self.metadata.cursor_transaction() as work:
            removed, paths = work.remove_topic(
                info.name,
                schema_id(name),
                at_ms,
                force=force,
                ticket=Ticket.ungated("deleting a topic with its subscriptions"),
            )
            detail = {"via": via, "force": force, "deletedWithTopic": True}
            work.record_audits(
                [AuditEntry("unsubscribe", info.name, s, role, detail, at_ms) for s in removed]
                + [
                    AuditEntry(
                        "delete-topic",
                        info.name,
                        None,
                        role,
                        {
                            "via": via,
                            "force": force,
                            "partitions": info.partitions,
                            "subscriptions": removed,
                        },
                        at_ms,
                    )
                ]
            )
        self.ledgers.remove_segments(paths)
        return removed


def _check_kind(info: TopicInfo, partitioned: bool) -> None:
    if partitioned and not info.partitions:
        raise InvalidArgumentError(
            f"{info.name} is not a partitioned topic: delete it with topics delete"
        )
    if not partitioned and info.partitions:
        raise InvalidArgumentError(
            f"{info.name} is a partitioned topic of {info.partitions} partitions: delete it "
            "with topics delete-partitioned-topic"
        )
