"""The services layer: the Broker and its collaborators, the gated operations,
dispatch and the producer.

May import ``cursorops.core.domain`` and ``cursorops.core.store`` (``tests/test_layers.py``).
"""
