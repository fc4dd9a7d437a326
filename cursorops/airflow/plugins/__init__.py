"""The Airflow plugin of the cursorops provider."""
