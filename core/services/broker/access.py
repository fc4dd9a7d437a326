"""Who may do what: the authorization decision of every Broker operation, and the refusal of
an irreversible operation on a namespace that requires approval."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from cursorops.core.domain import authz
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    NotAuthorizedError,
    NotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store.metadata import MetadataStore, TopicInfo
from cursorops.core.store.read_view import ReadView


class Access:
    """The authorization rule, read from the tenant and namespace records as they are now."""

    def __init__(self, config: Config, metadata: MetadataStore) -> None:
        self.config = config
        self.metadata = metadata

    def check(
        self,
        role: str,
        operation: Operation,
        tenant: str,
        resource: str,
        namespace: str | None = None,
        *,
        view: ReadView | None = None,
    ) -> None:
        """Authorize before anything is looked up, so a refusal never reveals what exists.

        ``view``: read in the caller's read transaction, else in one of its own."""
        if role in self.config.superuser_roles:
            return
        if operation in authz.SUPERUSER_ONLY:
            authz.check(role, operation, resource, superusers=self.config.superuser_roles)
            return
        # One statement: the tenant's admins and the role's grant in the namespace.
        asked = namespace if authz.GRANTS_ALLOWING[operation] else None
        with self._refused_when_missing(role, operation, resource):
            if view is None:
                tenant_admins, granted = self.metadata.access(tenant, asked, role)
            else:
                tenant_admins, granted = view.access(tenant, asked, role)
        self._decide(role, operation, resource, tenant_admins, granted)

    def authorized_topic(
        self, role: str, operation: Operation, topic: str | TopicName
    ) -> TopicInfo:
        """Parse ``topic`` (unless given parsed), check ``role`` for ``operation``, load it.

        The one authorization rule of every topic operation, for the Python
        path and for the Spark jobs alike. A partition's name is refused: give
        the topic.
        """
        with self.metadata.reading() as view:
            return self.authorized_topic_in(view, role, operation, topic)

    def may_read_content(self, role: str, topics: Iterable[str]) -> bool:
        """Whether ``role`` may read the keys, properties and payloads of messages of every
        one of ``topics`` (:func:`cursorops.core.domain.content.may_read`: PEEK_MESSAGES on
        each)."""
        from cursorops.core.domain.content import may_read

        return may_read(self.authorized_topic, role, topics)

    def authorized_topic_in(
        self, view: ReadView, role: str, operation: Operation, topic: str | TopicName
    ) -> TopicInfo:
        """:meth:`authorized_topic` in the caller's read transaction ``view``: an operation
        that reads more right after reads it in the same transaction."""
        name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
        if name.is_partition:
            raise InvalidArgumentError(f"'{topic}' names a partition; give the topic '{name.base}'")
        if role in self.config.superuser_roles or not authz.GRANTS_ALLOWING[operation]:
            self.check(role, operation, name.tenant, str(name), name.namespace_name, view=view)
            return view.topic(str(name))
        # One statement reads what authorizes the role and the topic; the decision comes
        # first, so a refusal still says nothing of whether the topic exists.
        resource = str(name)
        with self._refused_when_missing(role, operation, resource):
            tenant_admins, granted, info = view.access_and_topic(
                name.tenant, name.namespace_name, role, resource
            )
        self._decide(role, operation, resource, tenant_admins, granted)
        if info is None:
            raise TopicNotFoundError(f"Topic '{resource}' not found")
        return info

    @staticmethod
    @contextmanager
    def _refused_when_missing(role: str, operation: Operation, resource: str) -> Iterator[None]:
        """A missing tenant or namespace is a refusal, never "not found": a refusal must not
        reveal what exists."""
        try:
            yield
        except NotFoundError as exc:
            raise NotAuthorizedError(
                f"Role '{role}' is not authorized to {operation.value} on {resource}"
            ) from exc

    def _decide(
        self,
        role: str,
        operation: Operation,
        resource: str,
        tenant_admins: Iterable[str],
        granted: Iterable[str],
    ) -> None:
        """The rule (:func:`cursorops.core.domain.authz.check`) on what the store said of the
        role."""
        authz.check(
            role,
            operation,
            resource,
            superusers=self.config.superuser_roles,
            tenant_admins=tenant_admins,
            granted_actions=granted,
        )

    def refuse_without_approval(
        self,
        info: TopicInfo,
        what: str,
        workflow: str = "the cursorops_skip_messages or cursorops_skip_matching workflow",
    ) -> None:
        """The one check every door of an irreversible operation makes: on a namespace that
        requires approval, only an approved plan record applies
        (:func:`~cursorops.core.services.gating.skip.apply_approved_skip`)."""
        if info.approval_required:
            namespace = TopicName.parse(info.name).namespace_name
            raise ApprovalRequiredError(
                f"Namespace {namespace} requires a second person's approval for {what}: "
                f"nothing applied. Ask through {workflow} (REST answers 202 with the run; "
                "the CLI starts it when logged in with --admin-url)"
            )
