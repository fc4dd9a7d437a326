"""The HTTP lookup service (a client given the web port's http:// URL) and advertised
listeners (a client's ``listener_name``), with the official client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pulsar
import pytest

from cursorops.local.ports import free_port
from tests.protocol.harness import Standalone, start, unique


def round_trip(client: pulsar.Client, topic: str) -> list[bytes]:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for n in range(4):
        producer.send(f"m-{n}".encode(), partition_key=f"k-{n}")
    got = []
    for _ in range(4):
        message = consumer.receive(5000)
        got.append(message.data())
        consumer.acknowledge(message)
    return sorted(got)


def get(server: Standalone, path: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(f"{server.web_url}{path}", timeout=10) as answer:
            return int(answer.status), json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, None


@pytest.mark.slow
def test_the_http_lookup_service(tmp_path: Path) -> None:
    server = start(tmp_path, web=True)
    try:
        assert server.web_url is not None
        partitioned = unique("partitioned")
        request = urllib.request.Request(
            f"{server.web_url}/admin/v2/{partitioned.replace('://', '/')}/partitions",
            data=b"3",
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).close()
        client = server.client(service_url=server.web_url)
        try:
            expected = [f"m-{n}".encode() for n in range(4)]
            assert round_trip(client, unique("http-lookup")) == expected
            assert round_trip(client, partitioned) == expected
            assert len(client.get_topic_partitions(partitioned)) == 3
        finally:
            client.close()
        topic = unique("looked-up").replace("://", "/")
        status, body = get(server, f"/lookup/v2/topic/{topic}")
        assert status == 200 and isinstance(body, dict)
        assert body["brokerUrl"] == server.service_url and body["brokerUrlTls"] == ""
        assert body["httpUrl"] == server.web_url
        status, body = get(server, f"/admin/v2/{topic}/partitions?checkAllowAutoCreation=true")
        assert (status, body) == (200, {"partitions": 0})
        assert get(server, f"/admin/v2/{topic}/partitions")[0] == 404
        assert get(server, "/lookup/v2/topic/elsewhere/public/default/t")[0] == 404
    finally:
        server.stop()


@pytest.mark.slow
def test_advertised_listeners(tmp_path: Path) -> None:
    port, closed = free_port(), free_port()
    listeners = (
        f"internal:pulsar://127.0.0.1:{port},external:pulsar://localhost:{port},"
        f"dead:pulsar://127.0.0.1:{closed}"
    )
    server = start(
        tmp_path, web=True, broker_port=port, extra=("--advertised-listeners", listeners)
    )
    try:
        for name in (None, "internal", "external"):
            client = server.client(listener_name=name)
            try:
                assert len(round_trip(client, unique(f"listener-{name}"))) == 4
            finally:
                client.close()
        for name in ("dead", "unknown"):
            client = server.client(timeout_s=3, listener_name=name)
            try:
                topic = unique(f"listener-{name}")
                try:
                    client.create_producer(topic)
                except pulsar.PulsarException:
                    pass
                else:
                    raise AssertionError(f"listener {name} was served")
            finally:
                client.close()
        topic = unique("t").replace("://", "/")
        status, body = get(server, f"/lookup/v2/topic/{topic}?listenerName=external")
        assert status == 200 and isinstance(body, dict)
        assert body["brokerUrl"] == f"pulsar://localhost:{port}"
        assert get(server, f"/lookup/v2/topic/{topic}?listenerName=unknown")[0] == 404
    finally:
        server.stop()
