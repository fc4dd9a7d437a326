"""Warm a fresh Spark Connect server up before the first real job reaches it.

A new server's first job pays for everything once: the JVM loads and compiles
the Parquet reader and writer, the Arrow paths, the shuffle, sort and
aggregation code the jobs' plans use, and Spark forks the shared session's
Python workers, which import ``core`` and the jobs' modules. On two loaded
cores that was most of a minute, paid by whichever Airflow task came first.

A toy job warms only what it runs: one that wrote and read a small file through
``mapInArrow`` still left the first ``find_messages`` of a fresh server at
13 s against 4 s afterwards. So the warm-up runs the real jobs, unchanged, on
a throwaway home (a temporary folder, deleted afterwards): ``find_messages``
(its read, match, sort, write and summary) and ``audit_backlog`` (its grouped
analysis), on the shared session every job attaches to
(:func:`cursorops.spark.session.shared_session_id`). The launchers
(``scripts/airflow-env.sh``) run this once the server listens, while Airflow is
still starting.

Run::

    python -m cursorops.spark.warm_up --remote sc://127.0.0.1:15002
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cursorops.core.domain.config import Config

ROLE = "admin"
TOPIC = "persistent://warm-up/jobs/orders"
"""Two partitions, so the jobs' per-partition paths run as they do on a real topic."""
SUBSCRIPTION = "warm-up"
MESSAGES = 200
PILL_EVERY = 20
"""One message in this many carries ``poison=yes``, the property the warm-up finds."""


def build_home(home: Path) -> Config:
    """A home with :data:`TOPIC`: batches, keys and properties, one subscription owing all."""
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.producer import OutgoingMessage

    config = Config.from_home(home)
    with Broker(config) as broker:
        broker.admin.create_tenant(ROLE, "warm-up")
        broker.admin.create_namespace(ROLE, "warm-up/jobs")
        broker.admin.create_topic(ROLE, TOPIC, partitions=2)
        broker.admin.create_subscription(
            ROLE, TOPIC, SUBSCRIPTION, SubscriptionType.SHARED, initial_position="earliest"
        )
        messages = [
            OutgoingMessage(
                b"order %d" % i,
                key=f"customer-{i % 7}",
                properties={"poison": "yes"} if i % PILL_EVERY == 0 else {},
            )
            for i in range(MESSAGES)
        ]
        broker.producing.produce(ROLE, TOPIC, messages, batch_size=10)
    return config


def warm_up(remote: str) -> float:
    """The real jobs once each on a throwaway home; seconds taken."""
    from cursorops.core.domain.analysis.predicates import parse_predicate
    from cursorops.spark import audit_backlog, find_messages

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cursorops-warm-up-") as folder:
        config = build_home(Path(folder) / "home")
        summary = find_messages.run(
            config,
            TOPIC,
            SUBSCRIPTION,
            parse_predicate({"properties": {"poison": "yes"}}),
            str(Path(folder) / "matches"),
            role=ROLE,
            remote=remote,
        )
        expected = MESSAGES // PILL_EVERY
        if summary["matches"] != expected:
            raise RuntimeError(f"find_messages found {summary['matches']}, expected {expected}")
        audit_backlog.run(config, [TOPIC], role=ROLE, remote=remote)
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    from cursorops.spark.session import job_logger

    parser = argparse.ArgumentParser(prog="warm_up", description=__doc__.splitlines()[0])
    parser.add_argument("--remote", required=True, metavar="sc://HOST:PORT")
    args = parser.parse_args(argv)
    seconds = warm_up(args.remote)
    job_logger("cursorops.warm_up").info("Spark Connect server warmed up in %.1fs", seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
