"""``cursorops standalone``: the binary protocol and the admin REST paths, one process.

As ``pulsar standalone``: the first start creates the tenant ``public`` and
the namespace ``public/default``; topics are created on first produce or
subscribe. The binary protocol listens on the broker port (6650), the admin
v2 REST paths (the FastAPI app the Airflow plugin mounts, here without
Airflow's login: the loopback standalone has authentication off, as Pulsar
standalone has) on the web port (8080). A line on stdout says when both are
ready; SIGINT or SIGTERM stops it cleanly, consumers' messages released.
A standalone killed without that is freed by its next start on the home
(:mod:`protocol.broker_identity`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from core.broker import Broker
from core.config import Config
from core.errors import AlreadyExistsError
from protocol.auth import TokenAuthenticator, load_secret
from protocol.broker_identity import claim
from protocol.server import KEEPALIVE_SECONDS, Connection, Service, StoreThread, renew_leases

log = logging.getLogger("cursorops.standalone")

DEFAULT_BROKER_PORT = 6650
DEFAULT_WEB_PORT = 8080
DEFAULT_BIND = "127.0.0.1"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "public/default"


@dataclass(frozen=True)
class StandaloneSettings:
    bind: str = DEFAULT_BIND
    broker_port: int = DEFAULT_BROKER_PORT
    web_port: int | None = DEFAULT_WEB_PORT
    """None: no REST."""
    role: str = "admin"
    """The role every client acts as (authentication is off)."""
    log_level: str = "INFO"
    keepalive_s: float = KEEPALIVE_SECONDS
    """A connection silent this long is pinged, and closed when silent twice as long."""
    auth_token_secret: str | None = None
    """Token authentication's secret key (``data:;base64,...``, ``file://...`` or a path);
    None: authentication off, every client acts as :attr:`role`."""


def bootstrap(broker: Broker, role: str) -> None:
    """Create ``public`` and ``public/default`` when missing."""
    with contextlib.suppress(AlreadyExistsError):
        broker.create_tenant(role, DEFAULT_TENANT)
    with contextlib.suppress(AlreadyExistsError):
        broker.create_namespace(role, DEFAULT_NAMESPACE)


async def serve(config: Config, settings: StandaloneSettings, out: TextIO = sys.stdout) -> None:
    """Run until SIGINT/SIGTERM (or cancellation)."""
    store = StoreThread()
    broker = await store.run(Broker, config)
    await store.run(bootstrap, broker, settings.role)
    identity = claim(config.home)
    if identity.earlier_life:
        # What the earlier process of this broker held is deliverable before the first
        # client comes back, not when its consumers' leases lapse.
        released = await store.run(broker.release_consumers_of, identity.consumer_prefix)
        if released:
            log.info(
                "released %d consumers of broker %s's earlier life", released, identity.broker_id
            )
    host = "127.0.0.1" if settings.bind in ("0.0.0.0", "::", "") else settings.bind
    authenticator = None
    if settings.auth_token_secret is not None:
        authenticator = TokenAuthenticator(load_secret(settings.auth_token_secret))
    service = Service(
        broker,
        store,
        f"pulsar://{host}:{settings.broker_port}",
        settings.role,
        authenticator,
        settings.keepalive_s,
        identity.broker_id,
    )
    service.appender.start()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await Connection(service, reader, writer).serve()

    server = await asyncio.start_server(accept, settings.bind, settings.broker_port)
    port = server.sockets[0].getsockname()[1]
    service.service_url = f"pulsar://{host}:{port}"
    web: Any = None
    web_task: asyncio.Task[None] | None = None
    web_url = ""
    if settings.web_port is not None:
        import uvicorn

        from protocol.web import web_app

        app = web_app(config, settings.role, authenticator)
        web = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.bind,
                port=settings.web_port,
                log_level="warning",
                lifespan="off",
            )
        )
        web.install_signal_handlers = lambda: None
        web_task = asyncio.create_task(web.serve())
        while not web.started:
            if web_task.done():
                web_task.result()
                raise RuntimeError("the web server did not start")
            await asyncio.sleep(0.02)
        web_port = web.servers[0].sockets[0].getsockname()[1]
        web_url = f" admin http://{host}:{web_port}"
    renew = asyncio.create_task(renew_leases(service))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"cursorops standalone ready: {service.service_url}{web_url}", file=out, flush=True)
    try:
        await stop.wait()
    finally:
        print("cursorops standalone stopping", file=out, flush=True)
        server.close()
        renew.cancel()
        for connection in list(service.connections):
            await connection.close()
        await service.appender.drain()
        if web is not None and web_task is not None:
            web.should_exit = True
            with contextlib.suppress(Exception):
                await web_task
        await store.run(broker.close)
        store.close()
        identity.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run(config: Config, settings: StandaloneSettings) -> int:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(serve(config, settings))
    return 0
