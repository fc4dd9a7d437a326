"""The triggers cursorops's operators defer to (run by Airflow's triggerer)."""
