"""``GET /admin/v2/brokers`` and ``brokers list|status``: the brokers registered in the
store, as Pulsar lists the active ones; superusers only."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.protocol.harness import start


def _get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_standalone_lists_itself_and_stops_as_dead(tmp_path: Path) -> None:
    broker = start(tmp_path / "home", web=True)
    try:
        assert broker.web_url is not None
        web = broker.web_url.removeprefix("http://")
        status, listed = _get(f"{broker.web_url}/admin/v2/brokers")
        assert (status, listed) == (200, [web])
        status, lives = _get(f"{broker.web_url}/cursorops/v1/brokers")
        assert status == 200 and isinstance(lives, list) and len(lives) == 1
        life = lives[0]
        assert (life["epoch"], life["state"], life["webUrl"]) == (1, "live", broker.web_url)
        assert life["brokerUrl"] == broker.service_url
        shown = subprocess.run(
            [
                sys.executable,
                "-m",
                "cursorops.cli.main",
                "--admin-url",
                broker.web_url,
                "brokers",
                "status",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={"CURSOROPS_AUTH_TOKEN": "unused", "PATH": "/usr/bin:/bin"},
        )
        assert shown.returncode == 0, shown.stderr
        assert (
            f"{life['brokerId']} life 1 live  {broker.service_url} {broker.web_url}" in shown.stdout
        )
    finally:
        broker.stop()
    with broker.broker() as admin:
        assert [(r.epoch, r.state) for r in admin.cluster.brokers()] == [(1, "dead")]
        assert admin.cluster.list_brokers("admin")[0].state == "dead"
