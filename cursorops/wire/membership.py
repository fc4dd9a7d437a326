"""A standalone as one broker of a cluster: its life in the registry, its heartbeat, and
what it does when the others declared it dead.

The rules are the core's (:mod:`cursorops.core.services.broker.cluster`,
:mod:`cursorops.core.store.broker_registry`); here they run in a process:

- :func:`join` registers this broker's new life with the URLs a lookup answers for it,
  releasing what its earlier lives on this slot held, and names the consumers of this
  process after it.
- :class:`Heartbeat` beats on a thread of its own (a store thread busy with a long
  dispatch never delays it): every beat writes the heartbeat, declares the silent
  brokers dead, releases what they held, and refreshes the list of live brokers a
  lookup chooses an owner from.
- A beat that finds this life fenced (a pause outlasted the deadline) ends it: every
  client connection is closed, so the clients look their topics up again and resend
  what was not acknowledged, and the broker joins again as a new life.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from cursorops.core import Advertised, BrokerRecord, Fence
from cursorops.wire.listeners import BrokerUrls, Listener
from cursorops.wire.service import Service

log = logging.getLogger("cursorops.standalone")


def advertised(urls: BrokerUrls) -> Advertised:
    """What the registry keeps of a broker's URLs."""
    listeners = None
    if urls.listeners:
        listeners = {
            name: (item.broker_url, item.broker_url_tls) for name, item in urls.listeners.items()
        }
    return Advertised(urls.broker_url, urls.broker_url_tls, urls.http_url, listeners)


def urls_of(record: BrokerRecord) -> BrokerUrls:
    """What a lookup answering ``record``'s broker names, by listener too."""
    found = record.advertised
    listeners = None
    if found.listeners:
        listeners = {name: Listener(name, *pair) for name, pair in found.listeners.items()}
    return BrokerUrls(found.broker_url, found.broker_url_tls, found.web_url, "", listeners)


def lookup_urls(service: Service, topic_partition: str) -> tuple[BrokerUrls, bool]:
    """What a lookup of ``topic_partition`` answers: its owner's URLs among the live
    brokers, and whether that owner is another broker (a redirect)."""
    owner = service.broker.cluster.owner_of(topic_partition, service.live)
    if owner is None or owner.broker_id == service.slot:
        return service.urls, False
    return urls_of(owner), True


def join(service: Service, slot: str) -> Fence:
    """Start a new life of this broker (store thread or any): registered, its consumers
    named after it, the live brokers known."""
    fence = service.broker.cluster.join(slot, advertised(service.urls))
    service.broker_id = f"{fence.broker_id}.{fence.epoch}"
    service.live = service.broker.cluster.members()
    return fence


class Heartbeat:
    """The beat of one broker process, on a daemon thread, until :meth:`stop`."""

    def __init__(self, service: Service, slot: str, loop: asyncio.AbstractEventLoop) -> None:
        self._service = service
        self._slot = slot
        self._loop = loop
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cursorops-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        cluster = self._service.broker.cluster
        interval = cluster.config.broker_heartbeat_ms / 1000
        while not self._stopped.wait(interval):
            try:
                beat = cluster.beat()
                if not beat.alive:
                    self._fenced()
                    continue
                for fence in beat.declared:
                    log.warning(
                        "declared broker %s (life %d) dead: its session ended or its "
                        "heartbeat stopped",
                        fence.broker_id,
                        fence.epoch,
                    )
                if beat.released:
                    log.info("released %d consumers of dead brokers", beat.released)
                self._service.live = cluster.members()
            except Exception as exc:  # never ends the beat: a silent broker is a dead one
                log.warning("heartbeat failed: %s", " ".join(str(exc).split())[:300])

    def _fenced(self) -> None:
        fence = self._service.broker.cluster.fence
        log.warning(
            "this broker's life %s was declared dead by the cluster: closing every "
            "connection and joining again",
            fence.epoch if fence else "?",
        )
        future = asyncio.run_coroutine_threadsafe(self._new_life(), self._loop)
        try:
            future.result()
        except Exception as exc:  # the next beat tries again
            log.warning("joining again failed: %s", exc)

    async def _new_life(self) -> None:
        service = self._service
        for connection in list(service.connections):
            await connection.close()
        service.forget_connections_state()
        fence = await asyncio.to_thread(join, service, self._slot)
        log.info("joined the cluster again as broker %s life %d", fence.broker_id, fence.epoch)
