# cursorops on Airflow 3: the image every Airflow component and the CLI run from.
FROM apache/airflow:3.3.2-python3.11

USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

USER airflow
# The airflow-auth volume starts as a copy of this folder: owned by the airflow user.
RUN mkdir -p /opt/airflow/auth
COPY --chown=airflow:root . /opt/cursorops
RUN pip install --no-cache-dir "/opt/cursorops[airflow,spark]" \
 && pip install --no-cache-dir --force-reinstall --no-deps pyspark==4.3.0
ENV AIRFLOW__CORE__DAGS_FOLDER=/opt/cursorops/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/cursorops/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
