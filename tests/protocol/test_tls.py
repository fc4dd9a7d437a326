"""TLS transport and TLS client authentication, with certificates the test makes: the
official client over pulsar+ssl:// and https://, the role its certificate's CN."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pulsar
import pytest

from tests.protocol.certs import Authority, Pem, authority, issue
from tests.protocol.harness import Standalone, start, unique

pytestmark = pytest.mark.slow
"""The module starts standalones of its own (settings of their own): seconds each."""

NAMESPACE = "public/default"


@dataclass(frozen=True)
class Certs:
    ca: Authority
    server: Pem
    app: Pem
    stranger: Pem
    untrusted: Pem


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    folder = Path(tmp_path_factory.mktemp("certs"))
    ca = authority(folder)
    other = authority(folder / "other", "another CA")
    return Certs(
        ca,
        issue(ca, folder, "server", server=True),
        issue(ca, folder, "app"),
        issue(ca, folder, "stranger"),
        issue(other, folder / "other", "app"),
    )


def tls_flags(certs: Certs) -> tuple[str, ...]:
    return (
        "--tls-cert-file",
        str(certs.server.cert),
        "--tls-key-file",
        str(certs.server.key),
        "--tls-trust-certs-file",
        str(certs.ca.pem.cert),
        "--broker-port-tls",
        "0",
        "--web-port-tls",
        "0",
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Standalone]:
    home = Path(tmp_path_factory.mktemp("tls"))
    standalone = start(home, web=True, extra=(*tls_flags(certs), "--auth-tls"))
    try:
        with standalone.broker() as broker:
            broker.admin.grant_permission("admin", NAMESPACE, "app", ["produce", "consume"])
        yield standalone
    finally:
        standalone.stop()


def tls_client(
    server: Standalone, certs: Certs, pem: Pem | None, url: str | None = None, timeout_s: int = 10
) -> pulsar.Client:
    auth = None if pem is None else pulsar.AuthenticationTLS(str(pem.cert), str(pem.key))
    return server.client(
        timeout_s=timeout_s,
        service_url=url or server.tls_service_url,
        authentication=auth,
        tls_trust_certs_file_path=str(certs.ca.pem.cert),
        tls_validate_hostname=True,
    )


def topics(server: Standalone) -> set[str]:
    with server.broker() as broker:
        return {info.name for info in broker.admin.list_topics("admin", NAMESPACE)}


def round_trip(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    client.create_producer(topic).send(b"over tls")
    message = consumer.receive(5000)
    assert message.data() == b"over tls"
    consumer.acknowledge(message)


def test_the_ready_line_names_the_tls_ports(server: Standalone) -> None:
    assert server.tls_service_url is not None and server.tls_service_url.startswith("pulsar+ssl://")
    assert server.tls_web_url is not None and server.tls_web_url.startswith("https://")


def test_the_role_is_the_client_certificates_common_name(server: Standalone, certs: Certs) -> None:
    client = tls_client(server, certs, certs.app)
    try:
        round_trip(client, unique("tls"))
    finally:
        client.close()
    before = topics(server)
    stranger = tls_client(server, certs, certs.stranger, timeout_s=3)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            stranger.create_producer(unique("refused"))
    finally:
        stranger.close()
    assert topics(server) == before


def test_refusals_change_nothing(server: Standalone, certs: Certs) -> None:
    before = topics(server)
    untrusted = tls_client(server, certs, certs.untrusted, timeout_s=3)
    # Refused at CONNECT, with a timeout long enough that waiting it out would be TimeOut.
    no_cert = tls_client(server, certs, None, timeout_s=30)
    plain = server.client(timeout_s=30)  # the plain port, no credentials
    try:
        with pytest.raises(pulsar.PulsarException):  # refused in the TLS handshake
            untrusted.create_producer(unique("refused"))
        for client in (no_cert, plain):
            with pytest.raises(pulsar.AuthenticationError):
                client.create_producer(unique("refused"))
    finally:
        for client in (untrusted, no_cert, plain):
            client.close()
    assert topics(server) == before


def https(server: Standalone, certs: Certs, pem: Pem | None, path: str) -> int:
    context = ssl.create_default_context(cafile=str(certs.ca.pem.cert))
    if pem is not None:
        context.load_cert_chain(str(pem.cert), str(pem.key))
    try:
        with urllib.request.urlopen(
            f"{server.tls_web_url}{path}", timeout=10, context=context
        ) as r:
            json.load(r)
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_https_authenticates_by_the_client_certificate(server: Standalone, certs: Certs) -> None:
    path = "/admin/v2/persistent/public/default"
    assert https(server, certs, certs.app, path) == 200
    assert https(server, certs, certs.stranger, path) == 403
    assert https(server, certs, None, path) == 401
    # Refused in the handshake (under TLS 1.3 the client sees the connection closed).
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        https(server, certs, certs.untrusted, path)


def test_the_http_lookup_over_https(server: Standalone, certs: Certs) -> None:
    client = tls_client(server, certs, certs.app, url=server.tls_web_url)
    try:
        round_trip(client, unique("https-lookup"))
    finally:
        client.close()


def test_a_required_client_certificate(tmp_path: Path, certs: Certs) -> None:
    standalone = start(
        tmp_path, extra=(*tls_flags(certs), "--tls-require-client-cert", "--auth-tls")
    )
    try:
        with standalone.broker() as broker:
            broker.admin.grant_permission("admin", NAMESPACE, "app", ["produce", "consume"])
        no_cert = tls_client(standalone, certs, None, timeout_s=3)
        try:
            with pytest.raises(pulsar.PulsarException):
                no_cert.create_producer(unique("refused"))
        finally:
            no_cert.close()
        assert topics(standalone) == set()
        client = tls_client(standalone, certs, certs.app)
        try:
            round_trip(client, unique("required"))
        finally:
            client.close()
    finally:
        standalone.stop()
