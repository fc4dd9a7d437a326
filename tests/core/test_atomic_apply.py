"""Applying a skip plan is atomic across partitions, even when the process is killed.

A real process (the apply_skip_plan job, or a bare ``gating.skip.apply_skip``)
applies a plan over 8 partitions and is killed with SIGKILL at random moments;
afterwards either every partition has the whole plan applied (with its audit
record) or none has anything (and no audit record), and applying again
converges. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/orders"
PARTITIONS = 8
ROOT = Path(__file__).resolve().parents[2]

APPLY = """
import sys
from cursorops.core.services.broker import Broker
from cursorops.core.domain.config import Config
from cursorops.core.services.gating import skip
from cursorops.core.domain.acks.skip_plan import SkipPlan

home, url, path = sys.argv[1:]
plan = SkipPlan.from_json(open(path, encoding="utf-8").read())
with Broker(Config.from_home(home, metadata_url=url)) as broker:
    print("applying", flush=True)
    skip.apply_skip(broker.gated, "admin", plan)
print("applied", flush=True)
"""


def applied_counts(broker: Broker, plan: SkipPlan, sub: str) -> dict[str, int]:
    """Per topic partition, how many of the plan's messages are acknowledged now."""
    pending = {
        (m.message_id.ledger_id, m.message_id.entry_id, m.message_id.batch_index)
        for m in broker.reading.peek_messages("admin", TOPIC, sub, 1_000_000)
    }
    counts = dict.fromkeys(plan.partitions(), 0)
    for item in plan.items:
        if (item.ledger_id, item.entry_id, item.batch_index) not in pending:
            counts[item.topic_partition] += 1
    return counts


def audits_of(broker: Broker, plan: SkipPlan) -> list[dict[str, object]]:
    return [
        r.detail
        for r in broker.metadata.audit_log(TOPIC, limit=10_000)
        if r.kind == "skip" and r.detail.get("planId") == plan.plan_id
    ]


def run_apply(
    config: Config, plan_file: Path, subscription: str, job: bool, kill_after: float | None
) -> tuple[bool, float]:
    """Apply in a child process; SIGKILL it ``kill_after`` s after it starts applying.

    ``job``: the child is the apply_skip_plan job (``--skip-plan``), else a bare
    ``gating.skip.apply_skip``. Returns whether it finished, and how long applying took.
    """
    if job:
        argv = ["-m", "cursorops.spark.apply_skip_plan", "--home", str(config.home)]
        argv += ["--metadata-url", config.metadata_url, TOPIC, "-s", subscription]
        argv += ["--skip-plan", str(plan_file)]
    else:
        argv = ["-c", APPLY, str(config.home), config.metadata_url, str(plan_file)]
    # Unbuffered pipes, read a byte at a time up to the marker: whatever follows it stays in
    # the pipe for communicate() (a buffered reader would keep it, and it would be lost).
    child = subprocess.Popen(
        [sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    marker, stream = ("applying plan", child.stderr) if job else ("applying", child.stdout)
    assert stream is not None
    before = b""
    while marker.encode() not in before:
        byte = os.read(stream.fileno(), 1)
        if not byte:
            break
        before += byte
    started = time.monotonic()
    try:
        child.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        os.kill(child.pid, signal.SIGKILL)
    out_bytes, err_bytes = child.communicate(timeout=120)
    elapsed = time.monotonic() - started
    out, err = out_bytes.decode(errors="replace"), err_bytes.decode(errors="replace")
    if child.returncode == 0:
        assert ("applied" in out) or ('"planId"' in out)
        return True, elapsed
    assert child.returncode == -signal.SIGKILL, err
    return False, elapsed


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1])
def test_a_killed_apply_leaves_all_or_nothing_and_a_rerun_converges(
    tmp_path: Path, metadata_url: str, seed: int
) -> None:
    rng = random.Random(seed)
    config = Config.from_home(tmp_path / "home", metadata_url=metadata_url)
    with Broker(config) as broker:
        broker.admin.create_tenant("admin", "acme")
        broker.admin.create_namespace("admin", "acme/ops")
        broker.admin.create_topic("admin", TOPIC, partitions=PARTITIONS)
        ids = broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"m{i}".encode(), key=f"k{i}") for i in range(3000)]
        )
        ids += broker.producing.produce(
            "admin", TOPIC, [OutgoingMessage(f"b{i}".encode()) for i in range(800)], batch_size=4
        )
    timed = 0.0
    for run in range(10):
        sub = f"s{run}"
        with Broker(config) as broker:
            broker.admin.create_subscription(
                "admin", TOPIC, sub, SubscriptionType.SHARED, initial_position="earliest"
            )
            plan = skips.plan_skip(broker.gated, "admin", TOPIC, sub, rng.sample(ids, 1500))
        assert len(plan.partitions()) == PARTITIONS
        plan_file = tmp_path / f"plan-{run}.json"
        plan_file.write_text(plan.dumps(), encoding="utf-8")
        # Alternately the apply_skip_plan job and a bare gating.skip.apply_skip.
        job = run % 2 == 1
        if run < 2:
            finished, timed = run_apply(config, plan_file, sub, job, None)
            assert finished
        else:
            finished, _ = run_apply(config, plan_file, sub, job, rng.uniform(0, 1.2 * timed))
        with Broker(config) as broker:
            counts = applied_counts(broker, plan, sub)
            sizes = {name: len(plan.for_partition(name).items) for name in plan.partitions()}
            audits = audits_of(broker, plan)
            whole = counts == sizes
            assert whole or set(counts.values()) == {0}, counts
            assert finished <= whole
            assert len(audits) == int(whole)
            if whole:
                assert len(audits[0]["skipped"]) == len(plan.items)  # type: ignore[arg-type]
            # Re-running converges: everything applied, nothing applied twice.
            again = skips.apply_skip(broker.gated, "admin", plan)
            assert applied_counts(broker, plan, sub) == sizes
            assert len(again.skipped) == (0 if whole else len(plan.items))
            assert len(audits_of(broker, plan)) == int(whole) + 1
