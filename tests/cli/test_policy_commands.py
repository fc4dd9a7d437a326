"""Policies, compaction and schemas as commands: each the declared operation its REST
route serves, run the way an operator types it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cursorops.cli.main import main

TOPIC = "persistent://acme/ops/orders"
NAMESPACE = "acme/ops"


@pytest.fixture(autouse=True)
def _namespace(tmp_path: Path) -> None:
    for argv in (["tenants", "create", "acme"], ["namespaces", "create", NAMESPACE]):
        assert main(["--home", str(tmp_path), *argv]) == 0


def cli(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *args])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> object:
    code, out, err = cli(capsys, home, "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_deduplication_set_read_and_removed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli_json(capsys, tmp_path, "namespaces", "get-deduplication", NAMESPACE) is None
    code, out, _ = cli(capsys, tmp_path, "namespaces", "set-deduplication", NAMESPACE, "-e")
    assert (code, out) == (0, "Deduplication on acme/ops enabled\n")
    assert cli_json(capsys, tmp_path, "namespaces", "get-deduplication", NAMESPACE) is True
    assert cli(capsys, tmp_path, "topics", "create", TOPIC)[0] == 0
    cli(capsys, tmp_path, "topics", "set-deduplication", TOPIC, "--disable")
    assert cli_json(capsys, tmp_path, "topics", "get-deduplication", TOPIC) is False
    cli(capsys, tmp_path, "topics", "remove-deduplication", TOPIC)
    code, out, _ = cli(capsys, tmp_path, "topics", "get-deduplication", TOPIC)
    assert out == f"Deduplication of {TOPIC}: not set (the default applies)\n"


def test_a_strategy_outside_pulsar_s_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--home", str(tmp_path), "namespaces", "set-schema-compatibility-strategy",
              NAMESPACE, "-c", "SOMETIMES"])  # fmt: skip
    assert exited.value.code == 2
    code, out, _ = cli(
        capsys, tmp_path, "namespaces", "set-schema-compatibility-strategy", NAMESPACE,
        "-c", "BACKWARD",
    )  # fmt: skip
    assert code == 0
    assert (
        cli_json(capsys, tmp_path, "namespaces", "get-schema-compatibility-strategy", NAMESPACE)
        == "BACKWARD"
    )


def test_schema_upload_get_and_delete(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cli(capsys, tmp_path, "topics", "create", TOPIC)
    definition = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"}]}
    payload = tmp_path / "schema.json"
    payload.write_text(
        json.dumps({"type": "AVRO", "schema": json.dumps(definition), "properties": {"a": "1"}})
    )
    code, out, err = cli(capsys, tmp_path, "schemas", "upload", TOPIC, "-f", str(payload))
    assert (code, out) == (0, f"Schema of {TOPIC} is version 0\n"), err
    got = cli_json(capsys, tmp_path, "schemas", "get", TOPIC)
    assert isinstance(got, dict)
    assert (got["type"], json.loads(got["data"]), got["properties"]) == (
        "AVRO",
        definition,
        {"a": "1"},
    )
    code, out, _ = cli(capsys, tmp_path, "schemas", "delete", TOPIC)
    assert code == 0
    code, _, err = cli(capsys, tmp_path, "schemas", "get", TOPIC)
    assert code == 3 and "Schema not found" in err


def test_a_bad_schema_file_is_refused_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cli(capsys, tmp_path, "topics", "create", TOPIC)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    code, _, err = cli(capsys, tmp_path, "schemas", "upload", TOPIC, "-f", str(bad))
    assert code == 2 and "not JSON" in err
    code, _, err = cli(capsys, tmp_path, "schemas", "upload", TOPIC, "-f", str(tmp_path / "none"))
    assert code == 2 and "Cannot read" in err
    assert cli_json(capsys, tmp_path, "schemas", "get-all-versions", TOPIC) == {
        "getSchemaResponses": []
    }


def test_compaction_runs_and_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cli(capsys, tmp_path, "produce", TOPIC, "-m", "a", "-k", "k")
    status = cli_json(capsys, tmp_path, "topics", "compaction-status", TOPIC)
    assert status == {"status": "NOT_RUN", "lastError": ""}
    code, out, _ = cli(capsys, tmp_path, "topics", "compact", TOPIC)
    assert (code, out) == (0, f"Compacted {TOPIC}\n")
    assert cli_json(capsys, tmp_path, "topics", "compaction-status", TOPIC) == {
        "status": "SUCCESS",
        "lastError": "",
    }
