"""find_run_matches: a run's scan reads its request from the store and writes only in the
run's scratch folder, whatever it is handed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError, NotAuthorizedError
from cursorops.core.domain.exit_codes import exit_code
from cursorops.core.domain.plans.request_record import RequestRecord
from cursorops.core.services.broker import Broker
from cursorops.spark import find_run_matches
from cursorops.spark.match_list import read_match_list
from cursorops.spark.run_scratch import (
    MATCH_LIST,
    SUMMARY,
    checked_scratch,
    run_scratch,
    scratch_file,
    scratch_root,
)
from tests.spark_apps.topics import TOPIC, core_matches, make_topic

DAG = "cursorops_skip_matching"
HOSTILE_RUN_IDS = ["../../../etc", "/etc/passwd", "a:b", "a_b", "..", ".", "x" * 500, "\u202e/\0"]


def test_every_run_id_gets_a_folder_of_its_own_inside_the_scratch_root(tmp_path: Path):
    config = Config.from_home(tmp_path / "home")
    root = scratch_root(config).resolve()
    folders = set()
    for run_id in HOSTILE_RUN_IDS:
        folder = checked_scratch(config, DAG, run_id, create=True)
        assert folder.resolve().parent.parent == root
        folders.add(folder.resolve())
    assert len(folders) == len(HOSTILE_RUN_IDS)  # "a:b" and "a_b" included
    with pytest.raises(InvalidArgumentError):
        run_scratch(config, DAG, "")


def test_a_scratch_folder_or_file_that_links_out_is_refused(tmp_path: Path):
    config = Config.from_home(tmp_path / "home")
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = run_scratch(config, DAG, "manual__1")
    folder.parent.mkdir(parents=True)
    folder.symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidArgumentError, match="outside"):
        checked_scratch(config, DAG, "manual__1", create=True)
    other = checked_scratch(config, DAG, "manual__2", create=True)
    (other / SUMMARY).symlink_to(outside / "victim.json")
    with pytest.raises(InvalidArgumentError, match="link out"):
        scratch_file(config, DAG, "manual__2", SUMMARY)
    with pytest.raises(InvalidArgumentError, match="no file"):
        scratch_file(config, DAG, "manual__2", "../../../victim")
    assert list(outside.iterdir()) == []


def _requested(config: Config, run_id: str, predicate: dict[str, object]) -> RequestRecord:
    record = RequestRecord.create(
        operation="skip-matching",
        dag_id=DAG,
        run_id=run_id,
        requester="alice",
        role="admin",
        topic=TOPIC,
        subscription="plain",
        arguments={
            "predicate": predicate,
            "reason": "r",
            "ticket": None,
            "limit": 10,
            "allowLarge": False,
        },  # fmt: skip
        created_at_ms=1,
    )
    with Broker(config) as broker:
        return broker.workflow.save_request_record(record)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    topic = make_topic(tmp_path / "home", 44, partitions=2, messages=60)
    monkeypatch.setenv("CURSOROPS_HOME", str(topic.config.home))
    monkeypatch.setenv("CURSOROPS_METADATA_URL", "")
    monkeypatch.setenv("CURSOROPS_LEDGER_ROOT", "")
    return topic.config


def _victims(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("kept")
    target = tmp_path / "precious.json"
    target.write_text("{}")
    return folder, target


def _untouched(folder: Path, target: Path) -> None:
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]
    assert (folder / "keep.txt").read_text() == "kept" and target.read_text() == "{}"


@pytest.mark.spark
def test_the_job_scans_the_recorded_request_into_the_run_s_scratch_folder(
    spark, home: Config, tmp_path: Path
):
    from cursorops.core.domain.analysis.predicates import parse_predicate

    predicate = {"key": "k1"}
    record = _requested(home, "manual__1", predicate)
    run = ["--dag-id=" + DAG, "--run-id=manual__1", "--requester=alice"]
    assert find_run_matches.main(run) == 0
    folder = checked_scratch(home, DAG, "manual__1")
    summary = json.loads((folder / SUMMARY).read_text())
    assert summary["request"] == record.digest and summary["topic"] == TOPIC
    found = sorted(read_match_list(str(folder / MATCH_LIST)).column("message_id").to_pylist())
    assert found == core_matches(home, TOPIC, "plain", parse_predicate(predicate))
    assert found, "the key matches something"


@pytest.mark.spark
@pytest.mark.parametrize(
    "hostile",
    [
        ["--output", "{folder}"],
        ["--summary", "{target}"],
        ["--output={folder}"],
        ["--predicate", '{"publishTime": {"after": 0}}'],
        ["--role", "admin"],
        ["--ledger-root", "{folder}"],
        ["--home", "{folder}"],
        ["{folder}"],
        ["-s", "keyed"],
    ],
)
def test_no_flag_names_a_path_a_role_or_a_predicate(
    spark, home: Config, tmp_path: Path, hostile: list[str]
):
    folder, target = _victims(tmp_path)
    _requested(home, "manual__1", {"key": "k1"})
    run = ["--dag-id=" + DAG, "--run-id=manual__1", "--requester=alice"]
    given = [h.replace("{folder}", str(folder)).replace("{target}", str(target)) for h in hostile]
    with pytest.raises(SystemExit) as refused:
        find_run_matches.main([*run, *given])
    assert refused.value.code == 2
    _untouched(folder, target)
    assert not run_scratch(home, DAG, "manual__1").exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("run_id", "requester"), [("manual__2", "alice"), ("manual__1", "bob"), ("../x", "alice")]
)
def test_a_run_without_its_own_record_scans_nothing_and_writes_nothing(
    spark, home: Config, run_id: str, requester: str
):
    _requested(home, "manual__1", {"key": "k1"})
    code = find_run_matches.main(
        [f"--dag-id={DAG}", f"--run-id={run_id}", f"--requester={requester}"]
    )
    assert code == exit_code(NotAuthorizedError("x"))
    assert not scratch_root(home).exists()
