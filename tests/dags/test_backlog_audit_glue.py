"""The backlog audit's glue without Airflow running: history rows from an analysis, the
chart, the notifier's webhook, and ``cursorops audit history``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from cursorops.airflow.backlog_audit import chart_selection, load_thresholds, samples_from
from cursorops.airflow.chart import draw_history
from cursorops.core.domain.analysis.backlog import analysis_document
from cursorops.core.domain.analysis.backlog_audit import BacklogSample, Breach, Measure
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.services.broker import Broker
from tests.dags.conftest import SUBSCRIPTION, seed_topic

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def home(tmp_path) -> Config:
    config = Config.from_home(tmp_path / "home")
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/orders")
    return config


def test_history_rows_are_the_exact_analysis(home):
    seeded = seed_topic(home)
    with Broker(home) as broker:
        analyses = broker.analysis.analyze_backlog("admin", seeded.topic)
        document = analysis_document(seeded.topic, None, analyses)
        ages = broker.analysis.backlog_ages("admin", seeded.topic)
        [row] = samples_from(document, ages, 123, "run-1")
        broker.analysis.record_backlog_audit("admin", "run-1", [row])
        [stored] = broker.analysis.backlog_history("admin", seeded.topic)
    assert stored == row
    assert row.messages == sum(a.result.messages for a in analyses) == 56
    assert row.entries == sum(a.result.entries for a in analyses)
    assert row.subscription == SUBSCRIPTION and row.run_id == "run-1"
    assert row.oldest_publish_ms is not None


def test_history_rows_take_the_oldest_age_the_audit_job_wrote(home):
    seeded = seed_topic(home)
    with Broker(home) as broker:
        document = analysis_document(
            seeded.topic, None, broker.analysis.analyze_backlog("admin", seeded.topic)
        )
        ages = broker.analysis.backlog_ages("admin", seeded.topic)
    for name, value in ages.items():
        document["subscriptions"][name]["oldestPublishMs"] = value
    assert samples_from(document, None, 123, "run-1") == samples_from(document, ages, 123, "run-1")
    assert samples_from(document, None, 123, "run-1")[0].oldest_publish_ms is not None


def test_thresholds_from_the_param_else_the_home_file(tmp_path):
    assert load_thresholds({"defaults": {"maxMessages": 3}}, tmp_path).defaults.max_messages == 3
    assert load_thresholds({}, tmp_path).defaults.max_messages is None
    (tmp_path / "backlog-thresholds.json").write_text('{"defaults": {"maxAgeSeconds": 9}}')
    assert load_thresholds(None, tmp_path).defaults.max_age_s == 9
    (tmp_path / "backlog-thresholds.json").write_text("{")
    with pytest.raises(InvalidArgumentError, match="Invalid thresholds file"):
        load_thresholds(None, tmp_path)


def test_chart_is_a_png_of_the_breached_then_largest(tmp_path):
    samples = [
        BacklogSample("persistent://a/b/t", f"s{i}", 3_600_000, i, i, None) for i in range(4)
    ]
    breach = Breach("persistent://a/b/t", "s0", Measure.AGE, 99.0, 1)
    chosen = chart_selection(samples, [breach], 2)
    assert chosen == [
        ("persistent://a/b/t", "s0"),
        ("persistent://a/b/t", "s3"),
        ("persistent://a/b/t", "s2"),
    ]
    series = {key: [(0, 1), (3_600_000, 5)] for key in chosen}
    path = draw_history(series, {chosen[0]}, tmp_path / "c" / "backlog.png", "title")
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5_000


def test_notifier_posts_the_breaches_to_the_webhook(monkeypatch):
    from cursorops.airflow.notify import BacklogBreachNotifier

    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append({"path": self.path, "body": json.loads(body)})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hooks/backlog"
        monkeypatch.setenv(
            "AIRFLOW_CONN_TEST_BACKLOG_WEBHOOK", json.dumps({"conn_type": "http", "host": url})
        )
        BacklogBreachNotifier("t / s: 9 messages > 3", "test_backlog_webhook").notify({})
        BacklogBreachNotifier("nobody listens", "no_such_connection").notify({})
    finally:
        server.shutdown()
    assert received == [{"path": "/hooks/backlog", "body": {"text": "t / s: 9 messages > 3"}}]


def test_cli_audit_history_reads_the_same_rows(home, capsys):
    from cursorops.cli.main import main

    seeded = seed_topic(home)
    rows = [
        BacklogSample(seeded.topic, SUBSCRIPTION, 1_000, 56, 20, 500, "r1"),
        BacklogSample(seeded.topic, SUBSCRIPTION, 3_601_000, 40, 15, 900, "r2"),
    ]
    with Broker(home) as broker:
        broker.analysis.record_backlog_audit("admin", "r1", rows[:1])
        broker.analysis.record_backlog_audit("admin", "r2", rows[1:])
    argv = ["--home", str(home.home), "-o", "json", "audit", "history", seeded.topic]
    assert main([*argv, "-s", SUBSCRIPTION]) == 0
    assert json.loads(capsys.readouterr().out) == [r.to_json() for r in rows]
    assert main([*argv, "--since", "3600000"]) == 0
    assert [r["runId"] for r in json.loads(capsys.readouterr().out)] == ["r2"]
    assert main(["--home", str(home.home), "audit", "history", seeded.topic]) == 0
    text = capsys.readouterr().out
    assert "56 message(s)" in text and "40 message(s)" in text
    assert (
        main(["--home", str(home.home), "--role", "nobody", "audit", "history", seeded.topic]) == 5
    )


def test_audit_topics_every_namespace_or_the_chosen_ones(home):
    from cursorops.airflow.backlog_audit import audit_topics
    from cursorops.core.domain.errors import NotAuthorizedError

    seeded = seed_topic(home)
    with Broker(home) as broker:
        broker.admin.create_namespace("admin", "acme/empty")
        broker.admin.create_tenant("admin", "other")
        broker.admin.create_namespace("admin", "other/ns")
        broker.admin.create_topic("admin", "persistent://other/ns/t", 0)
        assert audit_topics(broker, "admin", []) == sorted(
            [seeded.topic, "persistent://other/ns/t"]
        )
        assert audit_topics(broker, "admin", ["acme/orders"]) == [seeded.topic]
        assert audit_topics(broker, "admin", ["acme/empty"]) == []
        assert broker.admin.list_namespaces("admin", "acme") == ["acme/empty", "acme/orders"]
        with pytest.raises(NotAuthorizedError):
            broker.admin.list_namespaces("nobody", "acme")
        with pytest.raises(NotAuthorizedError):
            audit_topics(broker, "nobody", [])


def test_radar_report_lists_a_poison_pill_with_its_skip_request(home, tmp_path):
    from cursorops.airflow.backlog_audit import radar_lines, radar_report, radar_summary

    seeded = seed_topic(home)
    (home.home / "backlog-thresholds.json").write_text(
        '{"radar": {"minRedeliveries": 3, "minAgeSeconds": null}}'
    )
    limits = load_thresholds(None, home.home).radar
    with Broker(home) as broker:
        consumer = broker.reading.dispatcher("admin", seeded.topic, SUBSCRIPTION).subscribe("c")
        first, count = None, 0
        for _ in range(3):  # the first message received is negatively acknowledged 3 times
            for message in consumer.receive_many(100):
                first = first or message
                if message.message_id == first.message_id:
                    count = message.redelivery_count + 1
                    consumer.negative_acknowledge(message)
                else:
                    consumer.acknowledge(message)
        consumer.close()
        report = radar_report(broker, "admin", [seeded.topic], limits)
    assert first is not None
    assert (report["subscriptions"], report["stuck"]) == (1, 1)
    [finding] = report["findings"]
    [pill] = finding["listed"]
    # Negatively acknowledged 3 times: 3, as the dispatcher counts (seed_topic's consume
    # dispatched only the messages it acknowledged).
    assert pill["redeliveryCount"] == count == 3 and pill["key"] == first.key
    assert pill["messageId"] == first.message_id.triplet()
    assert finding["skipRequest"]["conf"]["message_ids"] == [pill["messageId"]]
    summary = radar_summary(report, tmp_path / "radar.json")
    assert summary["withFindings"][0]["messageIds"] == [pill["messageId"]]
    assert len(json.dumps(summary)) < 1000
    logged = "\n".join(radar_lines(report))
    assert f"skip them: cursorops topics skip-messages {seeded.topic}" in logged
    # Any reader of the DAG may open its task log: the key is there as its size only.
    assert first.key not in logged
    assert f"key {len(first.key.encode())} bytes, masked" in logged


def test_bad_radar_thresholds_in_the_home_file_are_refused(tmp_path):
    (tmp_path / "backlog-thresholds.json").write_text('{"radar": {"maxListed": -1}}')
    with pytest.raises(InvalidArgumentError, match=r"radar\.maxListed must be an integer"):
        load_thresholds(None, tmp_path)
