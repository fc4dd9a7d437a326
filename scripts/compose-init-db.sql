-- The compose PostgreSQL holds two databases: cursorops (created by the image) and airflow.
CREATE DATABASE airflow OWNER cursorops;
