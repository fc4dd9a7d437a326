"""find_messages for a workflow run: the request comes from the store, the answer goes to the
run's scratch folder.

``cursorops_skip_matching``'s ``find_messages`` task runs this job with nothing but the
run's identity (rendered by Airflow from the run itself, never from an XCom)::

    spark-submit spark_apps/find_run_matches.py --dag-id=DAG --run-id=RUN --requester=USER

The topic, subscription, predicate and role are those of the run's request record
(:mod:`cursorops.core.domain.plans.request_record`), which the run's first task stored. A run
with no record, or with a record asked for by someone else, is refused. The job writes
the match list and its JSON summary into the run's scratch folder
(:mod:`cursorops.spark.run_scratch`), and the summary names the record's digest. The
job takes no flag for a path, a role, a topic or a predicate. The store and the ledger
root come from the job's environment, as for every Spark job.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from cursorops.core.domain.analysis.predicates import parse_predicate
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.spark.common import emit_json, remote_from, run_job
from cursorops.spark.run_scratch import MATCH_LIST, SUMMARY, checked_scratch, scratch_file

OPERATION = "skip-matching"
"""The gated operation whose request this job scans for."""


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="find_run_matches",
        description="Write the match list of a workflow run's recorded skip-matching request "
        "into the run's scratch folder",
    )
    parser.add_argument("--dag-id", required=True, help="the run's DAG")
    parser.add_argument("--run-id", required=True, help="the run's id")
    parser.add_argument("--requester", required=True, help="the run's triggering user")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run on this Spark Connect server (env CURSOROPS_SPARK_REMOTE)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def job() -> int:
        from cursorops.core.services.broker import Broker
        from cursorops.spark.find_messages import run

        remote = remote_from(args)
        config = Config.from_environ(os.environ)
        with Broker(config) as broker:
            record = broker.workflow.run_request_record(args.dag_id, args.run_id, args.requester)
        if record.operation != OPERATION:
            raise NotAuthorizedError(
                f"Request {record.digest} of run {args.run_id} is a {record.operation} "
                f"request, not {OPERATION}: nothing scanned"
            )
        predicate = parse_predicate(record.arguments["predicate"], now_ms=time.time_ns() // 10**6)
        checked_scratch(config, args.dag_id, args.run_id, create=True)
        output = scratch_file(config, args.dag_id, args.run_id, MATCH_LIST)
        summary = scratch_file(config, args.dag_id, args.run_id, SUMMARY)
        document = run(
            config,
            record.topic,
            record.subscription,
            predicate,
            str(output),
            args.master,
            role=record.role,
            remote=remote,
        )
        document["request"] = record.digest
        emit_json(document, str(summary), sys.stdout)
        return 0

    return run_job(job)


if __name__ == "__main__":
    from cursorops.spark.find_run_matches import main as package_main

    sys.exit(package_main(sys.argv[1:]))
