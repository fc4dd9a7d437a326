"""The rules of delivering messages to consumers: chunks, Key_Shared hashing,
redelivery counts, the rows still unacknowledged."""
