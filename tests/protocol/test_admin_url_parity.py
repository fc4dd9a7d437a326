"""pulsar-admin's day-one commands through ``--admin-url`` against a standalone's REST:
listing, deleting and skipping by the Python client's printed id answer as the local
commands do, and a refusal there changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.producer import OutgoingMessage
from tests.protocol.harness import Standalone, start

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    server = start(Path(tmp_path_factory.mktemp("admin-url")), web=True)
    try:
        yield server
    finally:
        server.stop()


def _remote(served: Standalone, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CURSOROPS_")}
    assert served.web_url is not None
    command = [sys.executable, "-m", "cursorops.cli.main", "--home", str(served.home)]
    command += ["--admin-url", served.web_url, "--auth-token", "unused-on-loopback"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_list_skip_and_delete_through_the_rest_door(served: Standalone) -> None:
    plain, parts = "persistent://public/default/plain", "persistent://public/default/parts"
    with served.broker() as broker:
        broker.admin.create_topic("admin", parts, 2)
        broker.admin.create_topic("admin", plain)
        broker.admin.create_subscription(
            "admin", plain, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        ids = broker.producing.produce(
            "admin", plain, [OutgoingMessage(b"a"), OutgoingMessage(b"b")]
        )
    listed = _remote(served, "topics", "list", "public/default")
    assert (listed.returncode, listed.stdout) == (0, f"{parts}\n{plain}\n"), listed.stderr
    assert _remote(served, "namespaces", "list", "public").stdout == "public/default\n"

    done = _remote(
        served, "topics", "skip-messages", plain, "-s", "s", "--message-id", ids[0].client_text()
    )
    assert done.returncode == 0, done.stderr
    with served.broker() as broker:
        stats = broker.analysis.topic_stats("admin", plain).to_pulsar_json()
        assert stats["subscriptions"]["s"]["msgBacklog"] == 1

    refused = _remote(served, "topics", "delete", parts)
    assert refused.returncode == 2 and "delete-partitioned-topic" in refused.stderr
    refused = _remote(served, "namespaces", "delete", "public/default")
    assert refused.returncode == 4 and "Cannot delete non empty namespace" in refused.stderr
    with served.broker() as broker:
        assert [t.name for t in broker.admin.list_topics("admin", "public/default")] == [
            parts,
            plain,
        ]

    assert _remote(served, "topics", "delete-partitioned-topic", parts).returncode == 0
    assert _remote(served, "topics", "delete", plain, "-f").returncode == 0
    with served.broker() as broker:
        assert broker.admin.list_topics("admin", "public/default") == []
        kinds = sorted(r.kind for r in broker.metadata.audit_log(plain))
    assert kinds[:1] == ["delete-topic"] and "unsubscribe" in kinds
