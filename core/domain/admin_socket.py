"""What the home's private admin socket speaks beyond the admin REST: shared by the
standalone that serves it (:mod:`cursorops.wire.web`) and the commands that reach it
(:mod:`cursorops.cli.home`). Constants only: it is on every command's path."""

STATUS_PATH = "/cursorops/v1/standalone"
"""GET: the standalone's status document (no role needed); served on the socket only."""
STOP_PATH = "/cursorops/v1/standalone/stop"
"""POST: the standalone stops; served on the socket only."""
ROLE_HEADER = "X-Cursorops-Role"
"""The Pulsar role a request on the socket acts as (absent: the standalone's ``--role``);
beyond ASCII, an RFC 8187 ``UTF-8''`` value
(:func:`cursorops.core.domain.header_text.header_value`)."""
