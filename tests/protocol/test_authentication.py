"""Authentication the official client offers: token, basic, an anonymous role on loopback,
with the authorization and auto-creation rules of Pulsar, on both ports."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pulsar
import pytest

from cursorops.wire.auth import AuthenticationError, create_token
from cursorops.wire.authentication import Authentication
from cursorops.wire.basic_auth import BasicAuthenticator, load_htpasswd
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, start, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow
"""The module starts standalones of its own (settings of their own): seconds each."""

SECRET = b"0123456789abcdef0123456789abcdef"
NAMESPACE = "public/default"


def htpasswd(path: Path, users: dict[str, str]) -> Path:
    """An htpasswd file of bcrypt hashes (as ``htpasswd -B`` writes, at a test's cost)."""
    lines = [
        f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}"
        for user, password in users.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    home = Path(tmp_path_factory.mktemp("auth"))
    key = home / "secret.key"
    key.write_bytes(SECRET)
    users = htpasswd(home / "users.htpasswd", {"alice": "alice-pw", "mallory": "mallory-pw"})
    standalone = start(
        home / "home",
        web=True,
        extra=(
            "--auth-token-secret",
            str(key),
            "--auth-basic-file",
            str(users),
            "--anonymous-role",
            "guest",
        ),
    )
    try:
        with standalone.broker() as broker:
            broker.admin.grant_permission("admin", NAMESPACE, "app", ["produce", "consume"])
            broker.admin.grant_permission("admin", NAMESPACE, "alice", ["produce", "consume"])
            broker.admin.grant_permission("admin", NAMESPACE, "guest", ["consume"])
        yield standalone
    finally:
        standalone.stop()


def topics(server: Standalone) -> set[str]:
    with server.broker() as broker:
        return {info.name for info in broker.admin.list_topics("admin", NAMESPACE)}


def round_trip(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    client.create_producer(topic).send(b"hello")
    message = consumer.receive(5000)
    assert message.data() == b"hello"
    consumer.acknowledge(message)


def test_a_role_allowed_to_produce_and_consume_auto_creates_topics(server: Standalone) -> None:
    client = server.client(authentication=pulsar.AuthenticationToken(create_token(SECRET, "app")))
    try:
        produced, subscribed = unique("by-producer"), unique("by-subscriber")
        client.create_producer(produced).send(b"x")
        client.subscribe(subscribed, "s")
        assert {produced, subscribed} <= topics(server)
        round_trip(client, unique("round-trip"))
    finally:
        client.close()


def test_a_role_without_a_grant_creates_nothing(server: Standalone) -> None:
    before = topics(server)
    client = server.client(
        timeout_s=3, authentication=pulsar.AuthenticationToken(create_token(SECRET, "nobody"))
    )
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(unique("refused"))
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(unique("refused"), "s")
    finally:
        client.close()
    assert topics(server) == before


def test_a_consume_only_role_may_subscribe_and_not_produce(server: Standalone) -> None:
    topic = unique("guest")
    client = server.client(timeout_s=3)  # no credentials: the anonymous role, on loopback
    try:
        client.subscribe(topic, "s")
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(topic)
    finally:
        client.close()
    assert topic in topics(server)


@pytest.mark.slow
def test_basic_authentication(server: Standalone) -> None:
    client = server.client(authentication=pulsar.AuthenticationBasic("alice", "alice-pw"))
    try:
        round_trip(client, unique("basic"))
    finally:
        client.close()
    before = topics(server)
    for user, password in (("alice", "wrong"), ("eve", "alice-pw"), ("alice", "")):
        # A timeout long enough that waiting it out would fail as TimeOut.
        refused = server.client(
            timeout_s=30, authentication=pulsar.AuthenticationBasic(user, password)
        )
        try:
            with pytest.raises(pulsar.AuthenticationError):
                refused.create_producer(unique("refused"))
        finally:
            refused.close()
    # mallory authenticates, and has no grant.
    stranger = server.client(
        timeout_s=3, authentication=pulsar.AuthenticationBasic("mallory", "mallory-pw")
    )
    try:
        with pytest.raises(pulsar.AuthorizationError):
            stranger.create_producer(unique("refused"))
    finally:
        stranger.close()
    assert topics(server) == before
    assert "authentication failed" in server.log_text()


def test_refused_credentials_fail_at_once_as_authentication_error(tmp_path: Path) -> None:
    """No anonymous role here: no token is refused too. The operation timeout is long, so a
    client left to wait it out would fail as TimeOut, not AuthenticationError."""
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    users = htpasswd(tmp_path / "users.htpasswd", {"alice": "alice-pw"})
    server = start(
        tmp_path / "home", extra=("--auth-token-secret", str(key), "--auth-basic-file", str(users))
    )
    try:
        refused: dict[str, pulsar.Authentication | None] = {
            "no credentials": None,
            "another key's token": pulsar.AuthenticationToken(
                create_token(b"another key of 32 bytes ........", "app")
            ),
            "an expired token": pulsar.AuthenticationToken(
                create_token(SECRET, "app", expires_at=1)
            ),
            "a wrong password": pulsar.AuthenticationBasic("alice", "wrong"),
        }
        for what, authentication in refused.items():
            extra = {} if authentication is None else {"authentication": authentication}
            client = server.client(timeout_s=30, **extra)
            try:
                with pytest.raises(pulsar.AuthenticationError):
                    client.create_producer(unique("refused"))
                # The refused connection was closed; the next one is refused as well.
                with pytest.raises(pulsar.AuthenticationError):
                    client.subscribe(unique("refused"), "s")
            finally:
                client.close()
            assert server.alive(), what
        log = server.log_text()
        for reason in (
            "Authentication is required",
            "Token signature mismatch",
            "Token expired",
            "Unknown user or wrong password",
        ):
            assert f"authentication failed: {reason}" in log
        with RawClient(server.port) as raw:
            # Connected, and refused: a ping is answered, the first request is answered
            # AuthenticationError in the response its client waits for, then it is closed.
            assert raw.connect()["server_version"]
            raw.send(command(CommandType.PING))
            assert raw.expect_frame(CommandType.PONG).type is CommandType.PONG
            raw.send(command(CommandType.PARTITIONED_METADATA, topic=unique("raw"), request_id=7))
            answer = raw.expect(CommandType.PARTITIONED_METADATA_RESPONSE)
            assert (answer["request_id"], answer["response"]) == (7, 1)
            assert answer["error"] == ServerError.AuthenticationError
            assert raw.closed_by_server(timeout=30)
        with RawClient(server.port) as idle:
            idle.connect()
            # Asking nothing, answering pings: closed all the same.
            assert idle.closed_by_server(timeout=30)
        good = server.client(
            authentication=pulsar.AuthenticationToken(create_token(SECRET, "admin"))
        )
        try:
            good.create_producer(unique("accepted")).send(b"x")
        finally:
            good.close()
    finally:
        server.stop()


def test_a_missing_tenant_is_refused_not_named(server: Standalone) -> None:
    """With authentication on, a role that may not see a tenant learns nothing of it: a
    missing tenant or namespace is refused as any other it has no grant on."""
    client = server.client(
        timeout_s=30, authentication=pulsar.AuthenticationToken(create_token(SECRET, "app"))
    )
    try:
        for topic in ("persistent://no-such-tenant/default/t", "public/no-such-namespace/t"):
            with pytest.raises(pulsar.AuthorizationError):
                client.create_producer(topic)
            with pytest.raises(pulsar.AuthorizationError):
                client.subscribe(topic, "s")
    finally:
        client.close()


def rest(server: Standalone, path: str, authorization: str | None = None) -> int:
    headers = {} if authorization is None else {"Authorization": authorization}
    request = urllib.request.Request(f"{server.web_url}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            json.load(answer)
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_rest_port_authenticates_as_the_broker_port(server: Standalone) -> None:
    topic = unique("rest").removeprefix("persistent://")
    stats = f"/admin/v2/persistent/{topic}/partitions?checkAllowAutoCreation=true"
    assert rest(server, stats, basic("alice", "alice-pw")) == 200
    assert rest(server, stats, f"Bearer {create_token(SECRET, 'app')}") == 200
    assert rest(server, stats) == 200  # the anonymous role may look up
    assert rest(server, stats, basic("alice", "wrong")) == 401
    assert rest(server, stats, "Bearer not.a.token") == 401
    assert rest(server, stats, "Digest abc") == 401
    assert rest(server, stats, basic("mallory", "mallory-pw")) == 403
    listing = "/admin/v2/persistent/public/default"
    assert rest(server, listing, basic("alice", "alice-pw")) == 200
    assert rest(server, listing, basic("mallory", "mallory-pw")) == 403


def test_the_anonymous_role_is_for_loopback_clients_only() -> None:
    checks = Authentication("admin", token=None, basic=None, tls=True, anonymous_role="guest")
    assert checks.role("none", b"", peer_cn=None, loopback=True) == "guest"
    assert checks.http_role("", peer_cn=None, loopback=True) == "guest"
    for method in ("none", ""):
        with pytest.raises(AuthenticationError):
            checks.role(method, b"", peer_cn=None, loopback=False)
    with pytest.raises(AuthenticationError):
        checks.http_role("", peer_cn=None, loopback=False)
    # A method no provider serves is anonymous, as in Pulsar: never more than that, its
    # data unread, and refused where the anonymous role does not apply.
    assert checks.role("token", b"x", peer_cn=None, loopback=True) == "guest"
    assert checks.role("basic", b"admin:pw", peer_cn=None, loopback=True) == "guest"
    with pytest.raises(AuthenticationError):
        checks.role("token", b"x", peer_cn=None, loopback=False)
    strict = Authentication("admin", token=None, basic=None, tls=True)
    with pytest.raises(AuthenticationError):
        strict.role("token", b"x", peer_cn=None, loopback=True)


def test_an_htpasswd_file_without_bcrypt_hashes_is_refused(tmp_path: Path) -> None:
    weak = {
        "plain": "alice:alice-pw",
        "apr1": "alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/",
        "des": "alice:rl0uE1Vn4Pg1I",
        "empty": "# nobody",
    }
    for name, line in weak.items():
        path = tmp_path / f"{name}.htpasswd"
        path.write_text(line + "\n")
        with pytest.raises(ValueError) as refused:
            load_htpasswd(str(path))
        assert "alice-pw" not in str(refused.value)
    good = htpasswd(tmp_path / "good", {"alice": "pw"})
    users = BasicAuthenticator.from_file(str(good))
    assert users.role(b"alice:pw") == "alice"
    assert users.role(b"alice:pw") == "alice"  # remembered
    with pytest.raises(AuthenticationError):
        users.role(b"alice:pW")


@pytest.mark.slow
def test_unusable_settings_are_refused_before_the_standalone_starts(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    for extra in (
        ("--auth-basic-file", missing),
        ("--anonymous-role", "guest"),
        ("--auth-tls",),
        ("--tls-cert-file", missing, "--tls-key-file", missing),
        ("--tls-trust-certs-file", missing),
        ("--advertised-listeners", "internal:http://127.0.0.1:1"),
    ):
        with pytest.raises(RuntimeError) as failed:
            start(tmp_path / "home", extra=extra)
        assert "Traceback" not in str(failed.value), extra
