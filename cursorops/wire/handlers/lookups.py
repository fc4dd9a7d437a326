"""Where a topic is and what it is made of: ``Lookup``, ``PartitionedMetadata``,
``GetTopicsOfNamespace``.

A lookup's or a partitioned-metadata request's failure is answered in its own
response (the client waits for that, not for a ``CommandError``).
"""

from __future__ import annotations

from cursorops.core.domain.errors import CursorOpsError, InvalidArgumentError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.wire.commands import CommandType, LookupType, ServerError, TopicsMode
from cursorops.wire.errors import server_error
from cursorops.wire.failures import lookup_failed, partitions_failed
from cursorops.wire.frames import Frame, command
from cursorops.wire.listeners import UnknownListenerError
from cursorops.wire.membership import lookup_urls
from cursorops.wire.session import Session
from cursorops.wire.topic_list import topic_list


async def lookup(session: Session, frame: Frame) -> None:
    """The topic partition's owner among the live brokers
    (:func:`~cursorops.core.services.broker.cluster.owner_of`): this broker answers Connect
    with its own URLs, another's a Redirect to that broker's (of the advertised
    listener the client names), which the client then asks with ``authoritative``,
    and an authoritative lookup is answered Connect here."""
    body = frame.body
    service = session.service
    request_id = body["request_id"]
    listener = body.get("advertised_listener_name")
    try:
        name = TopicName.parse(body.get("topic", ""))
        urls, kind = service.urls, LookupType.Connect
        if not body.get("authoritative"):
            urls, redirect = lookup_urls(service, str(name))
            kind = LookupType.Redirect if redirect else LookupType.Connect
        url, url_tls = urls.for_listener(listener)
        await service.store.run(service.partitions, session.role, body["topic"])
    except UnknownListenerError as exc:
        session.send(lookup_failed(request_id, ServerError.ServiceNotReady, str(exc)))
        return
    except CursorOpsError as exc:
        session.send(lookup_failed(request_id, server_error(exc), str(exc)))
        return
    session.send(
        command(
            CommandType.LOOKUP_RESPONSE,
            brokerServiceUrl=url,
            brokerServiceUrlTls=url_tls,
            response=int(kind),
            request_id=request_id,
            authoritative=True,
        )
    )


async def partitioned_metadata(session: Session, frame: Frame) -> None:
    body = frame.body
    service = session.service
    request_id = body["request_id"]
    try:
        TopicName.parse(body.get("topic", ""))
        partitions = await service.store.run(service.partitions, session.role, body["topic"])
    except CursorOpsError as exc:
        session.send(partitions_failed(request_id, server_error(exc), str(exc)))
        return
    session.send(
        command(
            CommandType.PARTITIONED_METADATA_RESPONSE,
            partitions=partitions,
            request_id=request_id,
            response=0,
        )
    )


async def get_topics_of_namespace(session: Session, frame: Frame) -> None:
    """The namespace's topics (partitions for a partitioned topic) for a regex or
    multi-topic consumer; an unchanged list (same hash) is answered without names."""
    body = frame.body
    service = session.service
    namespace = body.get("namespace", "")
    TopicName.parse(f"{namespace}/x")
    try:
        mode = TopicsMode(body.get("mode", TopicsMode.PERSISTENT))
    except ValueError as exc:
        raise InvalidArgumentError(f"Unknown topics mode {body.get('mode')}") from exc
    infos = await service.store.run(service.broker.admin.list_topics, session.role, namespace)
    partitions = [name for info in infos for name in info.partition_names()]
    listed = topic_list(partitions, mode, body.get("topics_pattern"))
    changed = body.get("topics_hash") != listed.hash
    session.send(
        command(
            CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            request_id=body["request_id"],
            topics=listed.topics if changed else [],
            filtered=listed.filtered,
            topics_hash=listed.hash,
            changed=changed,
        )
    )
