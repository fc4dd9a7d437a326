"""Acknowledgement state: ack sets, range sets, the cursor and its durable form."""
