"""``cursorops demo --protocol``: a real Pulsar app's poison pill, skipped by an operator.

A ``cursorops standalone`` is started on the home; an app in a separate process,
the official ``pulsar-client``, consumes orders with batch-index acks and
negatively acknowledges one poison pill inside a batch, over and over. The
exact backlog shows that only the pill is left (its batch neighbours stay
acknowledged). The operator plans the skip by the id the app printed; the
plan is previewed (the message and the backlog before and after); it is
applied (on a namespace that requires it, a second person approves it in
Airflow first: ``cursorops demo --airflow`` walks through that gate). The app
then moves on: the pill is never delivered again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from core.broker import Broker
from core.config import Config
from core.ids.message_id import MessageId

SUBSCRIPTION = "billing"
ORDERS = 100
BATCH = 10
PILL_AT = 57
NACKS_BEFORE_SKIP = 3
IN_FLIGHT_S = 1.0
"""After the skip commits, a pill delivery already on its way may still arrive this long."""
_READY = re.compile(r"cursorops standalone ready: (pulsar://\S+)")

_APP = textwrap.dedent(
    """
    import json, sys, pulsar
    url, topic, subscription = sys.argv[1:4]
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = client.subscribe(
        topic, subscription, consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        batch_index_ack_enabled=True, negative_ack_redelivery_delay_ms=300,
    )
    acked = nacks = 0
    while True:
        try:
            message = consumer.receive(500)
        except pulsar.Timeout:
            print(json.dumps({"acked": acked, "nacks": nacks}), flush=True)
            continue
        if message.data().startswith(b"POISON"):
            nacks += 1
            consumer.negative_acknowledge(message)
            mid = message.message_id()
            print(json.dumps({"pill": [mid.ledger_id(), mid.entry_id(), mid.batch_index()],
                              "nacks": nacks, "acked": acked}), flush=True)
        else:
            acked += 1
            consumer.acknowledge(message)
    """
)


@contextlib.contextmanager
def _standalone(config: Config) -> Iterator[str]:
    argv = [sys.executable, "-m", "cli.main", "--home", str(config.home)]
    if not config.metadata_url.startswith("sqlite:"):
        argv += ["--metadata-url", config.metadata_url]
    argv += ["standalone", "--broker-port", "0", "--no-web", "--log-level", "warning"]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, text=True, env=dict(os.environ, CURSOROPS_DAEMON="off")
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            match = _READY.search(line)
            if match:
                yield match.group(1)
                return
        raise RuntimeError("cursorops standalone did not start")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _events(app: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert app.stdout is not None
    for line in app.stdout:
        with contextlib.suppress(ValueError):
            yield json.loads(line)


def run(config: Config, role: str, *, say: TextIO | None = None) -> dict[str, object]:
    import pulsar

    def line(text: str = "") -> None:
        if say is not None:
            print(text, file=say, flush=True)

    stamp = datetime.now(tz=UTC).strftime("%Y%m%d-%H%M%S")
    topic = f"persistent://public/default/orders-{stamp}"
    summary: dict[str, object] = {"topic": topic, "subscription": SUBSCRIPTION}
    checks: dict[str, bool] = {}
    with _standalone(config) as url:
        line(f"[1] cursorops standalone serves {config.home} at {url}")
        client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            producer = client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=BATCH,
                batching_max_publish_delay_ms=50,
            )
            for i in range(ORDERS):
                body = f"POISON PILL order {i}" if i == PILL_AT else f"order {i}"
                producer.send_async(body.encode(), None)
            producer.flush()
        finally:
            client.close()
        line(
            f"[2] {ORDERS} orders produced in batches of {BATCH}; order {PILL_AT} is a poison pill"
        )
        app = subprocess.Popen(
            [sys.executable, "-c", _APP, url, topic, SUBSCRIPTION],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            pill: list[int] | None = None
            events = _events(app)
            deadline = time.monotonic() + 120
            for event in events:
                pill = event.get("pill", pill)
                if event["acked"] == ORDERS - 1 and event["nacks"] >= NACKS_BEFORE_SKIP:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the app did not get through the orders")
            assert pill is not None
            pill_id = MessageId(pill[0], pill[1], -1, pill[2])
            line(
                f"[3] the app (official pulsar-client, pid {app.pid}) acknowledged "
                f"{ORDERS - 1} orders and negatively acknowledged the pill "
                f"{pill_id.ledger_id}:{pill_id.entry_id}:{pill_id.batch_index} "
                f"{NACKS_BEFORE_SKIP}+ times"
            )
            with Broker(config) as broker:
                before = sum(
                    part.result.messages
                    for part in broker.analyze_backlog(role, topic, SUBSCRIPTION)
                )
                line(
                    f"[4] exact backlog: {before} message (the pill; its batch neighbours "
                    "stay acknowledged, batch-index acks)"
                )
                checks["only the pill is left"] = before == 1
                plan = broker.plan_skip(role, topic, SUBSCRIPTION, [pill_id])
                (described,) = broker.describe_messages(role, plan, 1)
                projection = broker.project_backlog(role, plan)
                line(
                    f"[5] preview of the skip: {described.payload_excerpt!r} at "
                    f"{described.message_id}; backlog {projection.before} -> {projection.after}"
                )
                line(
                    "    (where the namespace requires it, a second person approves this plan in"
                    " Airflow first: cursorops demo --airflow)"
                )
                outcome = broker.apply_skip(role, plan, via="demo")
                line(f"[6] skip applied: {len(outcome.skipped)} message skipped")
            skipped_at = time.monotonic()
            nacks_at_skip = 0
            redelivered = 0
            quiet_since = skipped_at
            for event in events:
                now = time.monotonic()
                if "pill" in event:
                    nacks_at_skip = event["nacks"]
                    quiet_since = now
                    # One delivery may have been on its way when the skip committed.
                    if now - skipped_at > IN_FLIGHT_S:
                        redelivered += 1
                if now - quiet_since > 3:
                    break
            with Broker(config) as broker:
                after = sum(
                    part.result.messages
                    for part in broker.analyze_backlog(role, topic, SUBSCRIPTION)
                )
            line(
                f"[7] the app moved on: no pill for 3 s (its last nack was #{nacks_at_skip}); "
                f"exact backlog {after}"
            )
            checks["the pill is never delivered again"] = redelivered == 0
            checks["backlog is empty"] = after == 0
        finally:
            app.kill()
            app.wait(10)
    summary["checks"] = checks
    summary["ok"] = all(checks.values())
    line(
        "\nchecks: "
        + ", ".join(f"{name}: {'ok' if ok else 'FAILED'}" for name, ok in checks.items())
    )
    return summary
