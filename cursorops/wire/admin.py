"""Admin REST paths the standalone adds to the plugin's app: the broker health check,
and the HTTP lookup a client given an ``http://`` service URL uses. Errors go through
the app's error table."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.responses import PlainTextResponse

from cursorops.core.domain.authz import Operation
from cursorops.core.domain.errors import TopicNotFoundError
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.services.broker import Broker
from cursorops.wire.listeners import BrokerUrls, UnknownListenerError


def router(
    broker: Broker,
    role_of: Callable[[Request], str],
    own_role: str,
    urls: Callable[[str], BrokerUrls] | None = None,
) -> APIRouter:
    """The routes; ``role_of`` names the caller's role (it refuses unauthenticated calls),
    ``own_role`` is the standalone's, which the health check uses; ``urls``, what a
    lookup of a topic partition answers: its owner's (None: no lookup path)."""
    routes = APIRouter(tags=["standalone"])
    # Dependencies as defaults: the routes are local, and their annotations (strings
    # under postponed evaluation) must resolve from the module alone.
    caller = Depends(role_of)

    @routes.get("/admin/v2/brokers/health", response_class=PlainTextResponse)
    def health() -> str:
        """Pulsar's health check: ``ok`` while the broker's stores answer (no login)."""
        broker.admin.list_namespaces(own_role, "public")
        return "ok"

    if urls is not None:
        answer = urls
        listener_header = Header(None, alias="X-Pulsar-ListenerName")

        @routes.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}")
        def lookup(
            domain: str,
            tenant: str,
            namespace: str,
            topic: str,
            listenerName: str | None = None,  # noqa: N803 (Pulsar's query parameter)
            header_listener: str | None = listener_header,
            role: str = caller,
        ) -> dict[str, str]:
            """Pulsar's HTTP lookup: the broker that owns the topic partition among the live
            brokers, for a role that may look it up; a missing topic is created on use.
            The owner's URLs are answered directly, where Pulsar redirects (307) to the
            owner's lookup: the client connects to the same broker either way."""
            if domain not in ("persistent", "non-persistent"):
                raise HTTPException(404, f"Unknown topic domain {domain!r}")
            name = f"{domain}://{tenant}/{namespace}/{topic}"
            with contextlib.suppress(TopicNotFoundError):
                broker.access.authorized_topic(role, Operation.LOOKUP, TopicName.parse(name).base)
            known = answer(str(TopicName.parse(name)))
            try:
                url, url_tls = known.for_listener(listenerName or header_listener)
            except UnknownListenerError as exc:
                raise HTTPException(404, str(exc)) from exc
            return {
                "brokerUrl": url,
                "brokerUrlTls": url_tls,
                "httpUrl": known.http_url,
                "httpUrlTls": known.http_url_tls,
                "nativeUrl": url,
            }

    return routes
