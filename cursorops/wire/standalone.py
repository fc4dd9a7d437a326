"""``cursorops standalone``: the binary protocol and the admin REST paths, one process.

As ``pulsar standalone``: the first start creates the tenant ``public`` and
the namespace ``public/default``; topics are created on first produce or
subscribe. The binary protocol listens on the broker port (6650), the admin
v2 REST paths (the FastAPI app the Airflow plugin mounts, here without
Airflow's login: the loopback standalone has authentication off, as Pulsar
standalone has) on the web port (8080). A line on stdout says when both are
ready; SIGINT or SIGTERM stops it cleanly, consumers' messages released.
A standalone killed without that is freed by its next start on the home
(:mod:`cursorops.wire.broker_identity`).

With a server certificate, both are served over TLS as well, on ports of their
own (6651 and 8443, as Pulsar's ``brokerServicePortTls`` and
``webServicePortTls``). Authentication (token, basic, TLS client certificates,
an anonymous role for loopback) is the same on every port.

The admin REST app is also served on the home's private Unix socket
(:attr:`StandaloneSettings.admin_socket`, :class:`cursorops.wire.web.SocketDoor`), where
the operating system's user is the authentication. A background standalone (no
broker port) serves that socket only, and stops after
:attr:`StandaloneSettings.idle_timeout_s` without a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import AlreadyExistsError, CursorOpsError, InvalidArgumentError
from cursorops.core.services.broker import Broker
from cursorops.wire import membership
from cursorops.wire.auth import TokenAuthenticator, load_secret
from cursorops.wire.authentication import Authentication
from cursorops.wire.basic_auth import BasicAuthenticator
from cursorops.wire.broker_identity import claim
from cursorops.wire.listeners import BrokerUrls, Listener, parse_advertised_listeners
from cursorops.wire.server import Connection
from cursorops.wire.service import KEEPALIVE_SECONDS, Service, renew_leases
from cursorops.wire.store_thread import StoreThread
from cursorops.wire.tls import TlsSettings, common_name, server_context

log = logging.getLogger("cursorops.standalone")

DEFAULT_BROKER_PORT = 6650
DEFAULT_WEB_PORT = 8080
DEFAULT_BROKER_PORT_TLS = 6651
DEFAULT_WEB_PORT_TLS = 8443
DEFAULT_BIND = "127.0.0.1"
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "public/default"


@dataclass(frozen=True)
class StandaloneSettings:
    bind: str = DEFAULT_BIND
    broker_port: int | None = DEFAULT_BROKER_PORT
    """None: no binary protocol and no TCP web port (a background standalone: the admin
    socket only)."""
    web_port: int | None = DEFAULT_WEB_PORT
    """None: no REST."""
    role: str = "admin"
    """The role every client acts as (authentication is off)."""
    log_level: str = "INFO"
    keepalive_s: float = KEEPALIVE_SECONDS
    """A connection silent this long is pinged, and closed when silent twice as long."""
    auth_token_secret: str | None = None
    """Token authentication's secret key (``data:;base64,...``, ``file://...`` or a path)."""
    auth_basic_file: str | None = None
    """Basic authentication's htpasswd file (bcrypt hashes)."""
    auth_tls: bool = False
    """TLS authentication: the role is the client certificate's common name."""
    anonymous_role: str | None = None
    """With authentication on, the role of a loopback client that offers no credentials
    (None: such a client is refused). With every provider off, every client acts as
    :attr:`role`."""
    tls: TlsSettings | None = None
    """None: no TLS ports."""
    broker_port_tls: int = DEFAULT_BROKER_PORT_TLS
    web_port_tls: int = DEFAULT_WEB_PORT_TLS
    advertised_listeners: str | None = None
    """Pulsar's ``advertisedListeners``: ``name:pulsar://host:port,...``."""
    admin_socket: str | None = None
    """The home's private Unix socket the admin REST app is served on too (its folder
    already checked to be this user's only); None: none."""
    idle_timeout_s: float | None = None
    """Stop after this long without a request on the admin socket (None: never)."""


def authentication(settings: StandaloneSettings) -> Authentication:
    """The providers the settings turn on (ValueError on an unusable one)."""
    if settings.auth_tls and (settings.tls is None or settings.tls.trust_certs_file is None):
        raise ValueError(
            "TLS authentication needs TLS with trusted client certificates "
            "(--tls-cert-file, --tls-key-file, --tls-trust-certs-file)"
        )
    checks = Authentication(
        settings.role,
        token=None
        if settings.auth_token_secret is None
        else TokenAuthenticator(load_secret(settings.auth_token_secret)),
        basic=None
        if settings.auth_basic_file is None
        else BasicAuthenticator.from_file(settings.auth_basic_file),
        tls=settings.auth_tls,
        anonymous_role=settings.anonymous_role,
    )
    if settings.anonymous_role is not None and not checks.enabled:
        raise ValueError("An anonymous role needs an authentication provider turned on")
    return checks


def check(settings: StandaloneSettings) -> None:
    """Refuse unusable settings before anything starts: InvalidArgumentError names the
    first (a credentials file that cannot be read, a malformed listener, a bad key)."""
    try:
        authentication(settings)
        if settings.advertised_listeners is not None:
            parse_advertised_listeners(settings.advertised_listeners)
        if settings.tls is not None:
            server_context(settings.tls)
    except (ValueError, OSError, ssl.SSLError) as exc:
        raise InvalidArgumentError(f"cursorops standalone: {exc}") from exc


def bootstrap(broker: Broker, role: str) -> None:
    """Create ``public`` and ``public/default`` when missing."""
    with contextlib.suppress(AlreadyExistsError):
        broker.admin.create_tenant(role, DEFAULT_TENANT)
    with contextlib.suppress(AlreadyExistsError):
        broker.admin.create_namespace(role, DEFAULT_NAMESPACE)


async def serve(config: Config, settings: StandaloneSettings, out: TextIO = sys.stdout) -> None:
    """Run until SIGINT/SIGTERM, a stop asked on the admin socket, the idle timeout (or
    cancellation)."""
    if settings.broker_port is None:
        await _serve_socket_only(config, settings, out)
        return
    store = StoreThread()
    broker = await store.run(Broker, config)
    await store.run(bootstrap, broker, settings.role)
    identity = claim(config.home)
    host = "127.0.0.1" if settings.bind in ("0.0.0.0", "::", "") else settings.bind
    checks = authentication(settings)
    listeners = _listeners(settings)
    tls_context = None if settings.tls is None else server_context(settings.tls)
    service = Service(
        broker,
        store,
        BrokerUrls(f"pulsar://{host}:{settings.broker_port}"),
        settings.role,
        checks,
        settings.keepalive_s,
        identity.broker_id,
    )
    service.appender.start()
    # Bound now, served once this broker joined the cluster (its consumers' names).
    servers, broker_url, broker_url_tls = await _bind_brokers(service, settings, host, tls_context)
    stop = asyncio.Event()
    app = None
    if settings.web_port is not None or settings.admin_socket is not None:
        from cursorops.wire.web import web_app

        app = web_app(
            config, settings.role, checks, lambda topic: membership.lookup_urls(service, topic)[0]
        )
    webs, web_urls = await _start_webs(app, settings, host)
    service.urls = BrokerUrls(
        broker_url,
        broker_url_tls,
        next((url for url in web_urls if url.startswith("http:")), ""),
        next((url for url in web_urls if url.startswith("https:")), ""),
        listeners,
    )
    # What an earlier life of this slot held is deliverable before the first client
    # comes back, not when its consumers' leases lapse.
    fence = await store.run(membership.join, service, identity.broker_id)
    log.debug("joined the cluster as broker %s life %d", fence.broker_id, fence.epoch)
    heartbeat = membership.Heartbeat(service, identity.broker_id, asyncio.get_running_loop())
    heartbeat.start()
    for server in servers:
        await server.start_serving()
    if app is not None and settings.admin_socket is not None:
        _, web, task = await _start_socket(app, config, settings, stop, background=False)
        webs.append((web, task))
    renew = asyncio.create_task(renew_leases(service))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"cursorops standalone ready: {_ready(broker_url, broker_url_tls, web_urls)}",
        file=out,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        print("cursorops standalone stopping", file=out, flush=True)
        _unlink(settings.admin_socket)
        for server in servers:
            server.close()
        renew.cancel()
        heartbeat.stop()
        await _close_broker(service, webs, app)
        identity.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _listeners(settings: StandaloneSettings) -> dict[str, Listener] | None:
    if settings.advertised_listeners is None:
        return None
    return parse_advertised_listeners(settings.advertised_listeners)


async def _bind_brokers(
    service: Service, settings: StandaloneSettings, host: str, tls_context: ssl.SSLContext | None
) -> tuple[list[asyncio.Server], str, str]:
    """The binary protocol's servers, bound and not serving yet, and their URLs (TLS:
    ``""`` without a certificate)."""

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await Connection(service, reader, writer).serve()

    servers = [
        await asyncio.start_server(accept, settings.bind, settings.broker_port, start_serving=False)
    ]
    broker_url = f"pulsar://{host}:{servers[0].sockets[0].getsockname()[1]}"
    broker_url_tls = ""
    if tls_context is not None:
        servers.append(
            await asyncio.start_server(
                accept,
                settings.bind,
                settings.broker_port_tls,
                ssl=tls_context,
                start_serving=False,
            )
        )
        broker_url_tls = f"pulsar+ssl://{host}:{servers[1].sockets[0].getsockname()[1]}"
    return servers, broker_url, broker_url_tls


async def _start_webs(
    app: Any, settings: StandaloneSettings, host: str
) -> tuple[list[tuple[Any, asyncio.Task[None]]], list[str]]:
    """The admin REST app on the web ports (HTTP, and HTTPS with a certificate)."""
    webs: list[tuple[Any, asyncio.Task[None]]] = []
    web_urls: list[str] = []
    if app is None or settings.web_port is None:
        return webs, web_urls
    for scheme, port in (("http", settings.web_port), ("https", settings.web_port_tls)):
        if scheme == "https" and settings.tls is None:
            continue
        web, task, bound = await _start_web(
            app, settings.bind, port, settings.tls if scheme == "https" else None
        )
        webs.append((web, task))
        web_urls.append(f"{scheme}://{host}:{bound}")
    return webs, web_urls


def _ready(broker_url: str, broker_url_tls: str, web_urls: list[str]) -> str:
    """What the ready line lists: the broker URL, the admin URL, then the TLS ones."""
    ready = broker_url
    if web_urls and web_urls[0].startswith("http:"):
        ready += f" admin {web_urls[0]}"
    if broker_url_tls:
        ready += f" tls {broker_url_tls}"
        ready += "".join(f" {url}" for url in web_urls if url.startswith("https:"))
    return ready


async def _close_broker(
    service: Service, webs: list[tuple[Any, asyncio.Task[None]]], app: Any
) -> None:
    """At the stop: every connection closed, what is queued appended, the web servers
    stopped, the brokers closed (the service's leaves the cluster) and the store thread."""
    store, broker = service.store, service.broker
    for connection in list(service.connections):
        await connection.close()
    await service.appender.drain()
    for web, web_task in webs:
        web.should_exit = True
        with contextlib.suppress(Exception):
            await web_task
    with contextlib.suppress(CursorOpsError):
        await store.run(broker.close)
    # The REST app's own broker, made at its first request: its pool's connections
    # hold SQLite's -wal and -shm files open until closed.
    rest_broker = None if app is None else getattr(app.state, "broker", None)
    if rest_broker is not None:
        rest_broker.close()
    store.close()


async def _serve_socket_only(config: Config, settings: StandaloneSettings, out: TextIO) -> None:
    """A background standalone: the admin REST app on the home's socket, nothing else,
    until stopped or idle for :attr:`StandaloneSettings.idle_timeout_s`."""
    from cursorops.wire.web import web_app

    if settings.admin_socket is None:
        raise ValueError("a standalone without a broker port serves its admin socket")
    # What a foreground standalone would find too: a fresh home has public/default.
    await asyncio.to_thread(lambda: bootstrap(Broker(config), settings.role))
    app = web_app(config, settings.role, authentication(settings))
    stop = asyncio.Event()
    door, web, task = await _start_socket(app, config, settings, stop, background=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"cursorops standalone ready: {settings.admin_socket}", file=out, flush=True)
    idle = asyncio.create_task(_idle_watch(door, settings.idle_timeout_s, stop, out))
    try:
        await stop.wait()
    finally:
        print("cursorops standalone stopping", file=out, flush=True)
        idle.cancel()
        _unlink(settings.admin_socket)
        web.should_exit = True
        with contextlib.suppress(Exception):
            await task
        rest_broker = getattr(app.state, "broker", None)
        if rest_broker is not None:
            rest_broker.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _idle_watch(
    door: Any, idle_timeout_s: float | None, stop: asyncio.Event, out: TextIO
) -> None:
    if idle_timeout_s is None:
        return
    while not stop.is_set():
        left = idle_timeout_s - door.idle_s()
        if left <= 0:
            print(f"idle for {idle_timeout_s:g} s: stopping", file=out, flush=True)
            stop.set()
            return
        await asyncio.sleep(min(left, 1.0) if door.in_flight == 0 else 1.0)


async def _start_socket(
    app: Any, config: Config, settings: StandaloneSettings, stop: asyncio.Event, *, background: bool
) -> tuple[Any, Any, asyncio.Task[None]]:
    """Serve ``app`` on the admin socket (mode 600, only this user's connections taken)."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from cursorops.wire.web import SocketDoor, peer_uid

    assert settings.admin_socket is not None
    path = settings.admin_socket
    started_ms = int(time.time() * 1000)

    def describe() -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "home": str(config.home),
            "metadataUrl": _redacted(config.metadata_url),
            "ledgerRoot": config.ledger_root,
            "socket": path,
            "background": background,
            "startedMs": started_ms,
            "idleTimeoutMs": None
            if settings.idle_timeout_s is None
            else int(settings.idle_timeout_s * 1000),
        }

    door = SocketDoor(app, describe, stop.set)

    class ThisUserOnly(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            # The folder (700) and the socket (600) already keep others out; a peer of
            # another uid (root) is not this user all the same.
            sock = transport.get_extra_info("socket")
            if sock is None or peer_uid(sock) != os.getuid():
                transport.close()
                return
            super().connection_made(transport)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _unlink(path)
    # Not through the umask, which other threads share: the folder (700) keeps everyone
    # else out until the socket has its mode.
    listener.bind(path)
    os.chmod(path, 0o600)
    web: Any = uvicorn.Server(
        uvicorn.Config(door, log_level="warning", lifespan="off", http=ThisUserOnly)
    )
    web.install_signal_handlers = lambda: None
    task = asyncio.create_task(web.serve(sockets=[listener]))
    while not web.started:
        if task.done():
            task.result()
            raise RuntimeError("the admin socket's server did not start")
        await asyncio.sleep(0.01)
    return door, web, task


def _unlink(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


async def _start_web(
    app: Any, bind: str, port: int, tls: TlsSettings | None
) -> tuple[Any, asyncio.Task[None], int]:
    """A uvicorn server for ``app``, started; over TLS it hands the app the CN of the
    client's verified certificate (request state), for TLS authentication."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from cursorops.wire.web import PEER_CN

    class PeerCertProtocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            cn = common_name(transport.get_extra_info("peercert"))
            # Per connection: the state is copied into each request's scope.
            self.app_state = {**self.app_state, PEER_CN: cn}

    options: dict[str, Any] = {}
    if tls is not None:
        context = server_context(tls)
        options = {
            "http": PeerCertProtocol,
            "ssl_certfile": tls.cert_file,
            "ssl_context_factory": lambda config, default: context,
        }
    web: Any = uvicorn.Server(
        uvicorn.Config(app, host=bind, port=port, log_level="warning", lifespan="off", **options)
    )
    web.install_signal_handlers = lambda: None
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()
            raise RuntimeError("the web server did not start")
        await asyncio.sleep(0.02)
    return web, task, web.servers[0].sockets[0].getsockname()[1]


def run(config: Config, settings: StandaloneSettings) -> int:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(serve(config, settings))
    return 0
