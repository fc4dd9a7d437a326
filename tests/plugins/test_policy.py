"""The skip-approval namespace policy: set from the CLI, authorized as tenant admin."""

from __future__ import annotations

from pathlib import Path

import pytest

from cursorops.cli.main import main
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.core.services.broker import Broker


def test_cli_sets_and_clears_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = Config.from_home(tmp_path)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme", ["ops"])
        broker.admin.create_namespace("admin", "acme/orders")
        broker.admin.create_topic("admin", "persistent://acme/orders/t", 0)
    home = ["--home", str(tmp_path)]
    assert (
        main([*home, "--role", "ops", "namespaces", "set-skip-approval", "acme/orders", "--enable"])
        == 0
    )
    assert "need an approval" in capsys.readouterr().out
    with Broker(config) as broker:
        assert broker.admin.skip_requires_approval("ops", "persistent://acme/orders/t") is True
    assert (
        main(
            [*home, "--role", "ops", "namespaces", "set-skip-approval", "acme/orders", "--disable"]
        )
        == 0
    )
    with Broker(config) as broker:
        assert broker.admin.skip_requires_approval("ops", "persistent://acme/orders/t") is False
        with pytest.raises(NotAuthorizedError):
            broker.admin.set_namespace_policy("alice", "acme/orders", skip_requires_approval=True)
    assert (
        main(
            [*home, "--role", "alice", "namespaces", "set-skip-approval", "acme/orders", "--enable"]
        )
        != 0
    )
    with pytest.raises(SystemExit) as usage:
        main([*home, "namespaces", "set-skip-approval", "acme/orders"])
    assert usage.value.code == 2
