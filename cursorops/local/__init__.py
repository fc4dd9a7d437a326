"""What runs next to cursorops on one machine, started and stopped in one way.

The demo, the tests and the benchmarks start every server they talk to from here (or,
for Airflow, from :mod:`cursorops.airflow.local_airflow`): each is a context manager
that starts the server, waits until it answers (an error naming its log otherwise),
and stops it and every process it started on the way out.

- :mod:`.brokers`: ``cursorops standalone`` brokers, one or several on one store;
- :mod:`.postgres`: throwaway databases and schemas on a PostgreSQL server;
- :mod:`.spark`: a Spark Connect server, and a Spark standalone cluster;
- :mod:`.ports`: a free port for a server to take, and whether one listens.
"""

from __future__ import annotations
