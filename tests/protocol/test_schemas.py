"""The schema registry through the official client: JSON, Avro and String producers and
consumers, versions, Pulsar's default compatibility (FULL), and the registry's commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from cursorops.core.domain.schemas import SchemaType, decode_version
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, start, unique
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow
"""The module starts standalones of its own (settings of their own): seconds each."""

ROLE = "admin"


def _order(**fields: object) -> type[Record]:
    """A record class named ``Order`` with these fields (the versions of one record)."""
    return type("Order", (Record,), fields)


Order = _order(item=String(), quantity=Integer())
OrderWithNote = _order(item=String(), quantity=Integer(), note=String(required_default=True))
"""An optional field with a default added: FULL-compatible both ways."""
OrderNoteWithoutDefault = _order(item=String(), quantity=Integer(), note=String())
"""An optional field added without a default: an old reader could, a new one cannot."""
OrderQuantityAsText = _order(item=String(), quantity=String())
"""A field's type changed: refused."""


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    server = start(Path(tmp_path_factory.mktemp("schemas")), web=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = standalone.client()
    try:
        yield c
    finally:
        c.close()


def _versions(standalone: Standalone, topic: str) -> list[tuple[int, SchemaType]]:
    with standalone.broker() as broker:
        return [(v, info.type) for v, info, _ in broker.schemas.schema_versions(ROLE, topic)]


@pytest.mark.parametrize("schema_class", [JsonSchema, AvroSchema])
def test_records_round_trip_and_register_one_version(
    standalone: Standalone, client: pulsar.Client, schema_class: type
) -> None:
    topic = unique("records")
    consumer = client.subscribe(topic, "s", schema=schema_class(Order))
    producer = client.create_producer(topic, schema=schema_class(Order))
    sent = [Order(item=f"i{n}", quantity=n) for n in range(5)]
    for order in sent:
        producer.send(order)
    got = []
    for _ in sent:
        message = consumer.receive(5000)
        got.append(message.value())
        consumer.acknowledge(message)
    assert [(o.item, o.quantity) for o in got] == [(o.item, o.quantity) for o in sent]
    expected = SchemaType.JSON if schema_class is JsonSchema else SchemaType.AVRO
    # The consumer registered it on the idle topic; the producer found the same version.
    assert _versions(standalone, topic) == [(0, expected)]
    producer.close()
    consumer.close()


def test_a_compatible_change_is_a_new_version_an_incompatible_one_is_refused(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique("evolve")
    first = client.create_producer(topic, schema=AvroSchema(Order))
    first.send(Order(item="a", quantity=1))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(OrderNoteWithoutDefault))
    second = client.create_producer(topic, schema=AvroSchema(OrderWithNote))
    second.send(OrderWithNote(item="b", quantity=2, note="n"))
    assert _versions(standalone, topic) == [(0, SchemaType.AVRO), (1, SchemaType.AVRO)]
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(OrderQuantityAsText))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())
    # The same schema again is its existing version, not a new one.
    again = client.create_producer(topic, schema=AvroSchema(Order))
    assert _versions(standalone, topic) == [(0, SchemaType.AVRO), (1, SchemaType.AVRO)]
    # A consumer must read the latest version's data: the text quantity cannot.
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "bad", schema=AvroSchema(OrderQuantityAsText))
    reader = client.subscribe(topic, "ok", schema=AvroSchema(OrderWithNote))
    second.send(OrderWithNote(item="c", quantity=3, note="m"))
    got = reader.receive(5000)
    assert (got.value().item, got.value().note) == ("c", "m")
    for closing in (first, second, again, reader):
        closing.close()


def test_strings_and_a_plain_bytes_producer(standalone: Standalone, client: pulsar.Client) -> None:
    topic = unique("strings")
    producer = client.create_producer(topic, schema=StringSchema())
    consumer = client.subscribe(
        topic, "s", schema=StringSchema(), initial_position=pulsar.InitialPosition.Earliest
    )
    producer.send("héllo")
    # Without a schema a producer may still write (schema validation is not enforced).
    plain = client.create_producer(topic)
    plain.send(b"plain")
    assert [consumer.receive(5000).value() for _ in range(2)] == ["héllo", "plain"]
    assert _versions(standalone, topic) == [(0, SchemaType.STRING)]
    for closing in (producer, plain, consumer):
        closing.close()


def test_a_consumer_schema_on_a_topic_with_data_and_no_schema_is_refused(
    standalone: Standalone, client: pulsar.Client
) -> None:
    topic = unique("untyped")
    producer = client.create_producer(topic)
    producer.send(b"raw bytes")
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "s", schema=JsonSchema(Order))
    assert _versions(standalone, topic) == []
    producer.close()


def test_get_schema_and_get_or_create_schema(standalone: Standalone) -> None:
    topic = unique("raw")
    definition = json.dumps(
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
    ).encode()
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.send(command(CommandType.GET_SCHEMA, request_id=1, topic=topic))
        missing = raw.expect(CommandType.GET_SCHEMA_RESPONSE)
        assert missing["error_code"] == ServerError.TopicNotFound
        schema = {"name": "R", "schema_data": definition, "type": int(SchemaType.AVRO)}
        raw.send(
            command(CommandType.GET_OR_CREATE_SCHEMA, request_id=2, topic=topic, schema=schema)
        )
        created = raw.expect(CommandType.GET_OR_CREATE_SCHEMA_RESPONSE)
        assert decode_version(created["schema_version"]) == 0
        raw.send(command(CommandType.GET_SCHEMA, request_id=3, topic=topic))
        found = raw.expect(CommandType.GET_SCHEMA_RESPONSE)
        assert found["schema"]["schema_data"] == definition
        assert decode_version(found["schema_version"]) == 0
        # A required field added without a default: refused under FULL.
        changed = json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "string"}, {"name": "b", "type": "int"}],
            }
        ).encode()
        refused = {**schema, "schema_data": changed}
        raw.send(
            command(CommandType.GET_OR_CREATE_SCHEMA, request_id=4, topic=topic, schema=refused)
        )
        answer = raw.expect(CommandType.GET_OR_CREATE_SCHEMA_RESPONSE)
        assert answer["error_code"] == ServerError.IncompatibleSchema
        assert "schema_version" not in answer
        version_1 = (1).to_bytes(8, "big")
        raw.send(
            command(CommandType.GET_SCHEMA, request_id=5, topic=topic, schema_version=version_1)
        )
        assert (
            raw.expect(CommandType.GET_SCHEMA_RESPONSE)["error_code"] == ServerError.TopicNotFound
        )
    assert _versions(standalone, topic) == [(0, SchemaType.AVRO)]


def test_a_consumer_reads_every_version_by_the_message_s_schema_version(
    client: pulsar.Client,
) -> None:
    topic = unique("versions")
    first = client.create_producer(topic, schema=AvroSchema(Order))
    first.send(Order(item="a", quantity=1))
    second = client.create_producer(topic, schema=AvroSchema(OrderWithNote))
    second.send(OrderWithNote(item="b", quantity=2, note="n"))
    reader = client.subscribe(
        topic,
        "all",
        schema=AvroSchema(OrderWithNote),
        initial_position=pulsar.InitialPosition.Earliest,
    )
    got = [reader.receive(5000) for _ in range(2)]
    # The version each producer was given is in its messages' metadata.
    assert [decode_version(m.schema_version().encode("latin-1")) for m in got] == [0, 1]
    values = [m.value() for m in got]
    assert [(v.item, v.quantity, v.note) for v in values] == [("a", 1, None), ("b", 2, "n")]
    for closing in (first, second, reader):
        closing.close()


def test_the_admin_schema_paths(standalone: Standalone, client: pulsar.Client) -> None:
    topic = unique("admin")
    path = "/admin/v2/schemas/" + topic.removeprefix("persistent://") + "/schema"
    definition = json.dumps(Order.schema(), indent=True)  # as the official client writes it
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.get(path).status_code == 404
        posted = web.post(path, json={"type": "AVRO", "schema": definition, "properties": {}})
        assert posted.json() == {"version": {"version": 0}}
        found = web.get(path).json()
        assert (found["version"], found["type"], json.loads(found["data"])) == (
            0,
            "AVRO",
            Order.schema(),
        )
        refused = json.dumps(OrderQuantityAsText.schema())
        assert web.post(path, json={"type": "AVRO", "schema": refused}).status_code == 409
        assert web.post(path, json={"type": "NOPE", "schema": ""}).status_code == 400
        # The official client's producer with that schema is given the stored version.
        producer = client.create_producer(topic, schema=AvroSchema(Order))
        producer.close()
        assert [v["version"] for v in web.get(path + "s").json()["getSchemaResponses"]] == [0]
        assert web.delete(path).json() == {"version": 1}
        assert web.get(path).status_code == 404
        # After a deletion any schema may start the history afresh, at the next number.
        again = web.post(path, json={"type": "STRING", "schema": ""})
        assert again.json() == {"version": {"version": 2}}
        assert web.get(path + "/2").json()["type"] == "STRING"
        assert web.get(path + "/0").status_code == 404


def test_a_namespace_strategy_admits_what_full_refuses(
    standalone: Standalone, client: pulsar.Client
) -> None:
    path = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
    topic = unique("strategy")
    first = client.create_producer(topic, schema=AvroSchema(Order))
    with httpx.Client(base_url=str(standalone.web_url)) as web:
        assert web.get(path).json() == "UNDEFINED"
        assert web.put(path, json="SOMETIMES").status_code == 400
        assert web.put(path, json="ALWAYS_COMPATIBLE").status_code == 204
        try:
            assert web.get(path).json() == "ALWAYS_COMPATIBLE"
            changed = client.create_producer(topic, schema=AvroSchema(OrderQuantityAsText))
            changed.close()
        finally:
            assert web.delete(path).status_code == 204
        assert web.get(path).json() == "UNDEFINED"
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(OrderNoteWithoutDefault))
    first.close()


def test_hostile_schemas_are_refused_and_change_nothing(standalone: Standalone) -> None:
    topic = unique("hostile")
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.send(
            command(CommandType.GET_SCHEMA, request_id=1, topic=topic, schema_version=b"\x01\x02")
        )
        short = raw.expect(CommandType.GET_SCHEMA_RESPONSE)
        assert short["error_code"] == ServerError.NotAllowedError
        assert "8 bytes" in short["error_message"]
        for request_id, schema in enumerate(
            (
                {"name": "x", "schema_data": b"", "type": 99},
                {"name": "x", "schema_data": b"{not json", "type": int(SchemaType.AVRO)},
                {"name": "x", "schema_data": b'{"type": "nope"}', "type": int(SchemaType.JSON)},
            ),
            start=10,
        ):
            raw.send(
                command(
                    CommandType.GET_OR_CREATE_SCHEMA,
                    request_id=request_id,
                    topic=topic,
                    schema=schema,
                )
            )
            answer = raw.expect(CommandType.GET_OR_CREATE_SCHEMA_RESPONSE)
            assert answer["error_code"] in (
                ServerError.NotAllowedError,
                ServerError.IncompatibleSchema,
            )
            assert answer["error_message"]
            raw.send(
                command(
                    CommandType.PRODUCER,
                    topic=topic,
                    producer_id=request_id,
                    request_id=100 + request_id,
                    schema=schema,
                )
            )
            assert raw.expect(CommandType.ERROR)["request_id"] == 100 + request_id
        # The connection is still served.
        raw.send(command(CommandType.PING))
        raw.expect(CommandType.PONG)
    assert _versions(standalone, topic) == []
