"""The read path: dispatch, messages, Key_Shared hashing, entry filters."""
