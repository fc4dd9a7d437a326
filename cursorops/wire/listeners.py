"""Pulsar's advertised listeners: the broker URLs a lookup answers, by listener name.

``advertisedListeners=internal:pulsar://10.0.0.5:6650,external:pulsar+ssl://broker.example:6651``:
each name has at most one ``pulsar://`` and one ``pulsar+ssl://`` URL. A client
that names a listener (``listener_name``) is answered that listener's URLs; one
naming no listener, the internal listener's (the first named, as Pulsar's
``internalListenerName`` defaults to); one naming an unknown listener, an error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit

_SCHEMES = {"pulsar": "broker_url", "pulsar+ssl": "broker_url_tls"}


class UnknownListenerError(Exception):
    """A lookup names a listener the standalone does not advertise."""


@dataclass(frozen=True)
class Listener:
    name: str
    broker_url: str = ""
    broker_url_tls: str = ""


def parse_advertised_listeners(spec: str) -> dict[str, Listener]:
    """Listeners in the order named; ValueError on a malformed or repeated entry."""
    listeners: dict[str, Listener] = {}
    for item in spec.split(","):
        item = item.strip()
        name, sep, url = item.partition(":")
        name = name.strip()
        if not item or not sep or not name:
            raise ValueError(f"Advertised listener {item!r}: expected name:pulsar://host:port")
        parts = urlsplit(url)
        field = _SCHEMES.get(parts.scheme)
        if field is None or not parts.hostname or parts.port is None or parts.path:
            raise ValueError(
                f"Advertised listener {name}: {url!r} is not pulsar://host:port "
                "or pulsar+ssl://host:port"
            )
        listener = listeners.get(name, Listener(name))
        if getattr(listener, field):
            raise ValueError(f"Advertised listener {name} names two {parts.scheme}:// URLs")
        listeners[name] = replace(listener, **{field: url})
    return listeners


@dataclass(frozen=True)
class BrokerUrls:
    """What a lookup answers: the standalone's own URLs, or its advertised listeners'."""

    broker_url: str
    broker_url_tls: str = ""
    http_url: str = ""
    http_url_tls: str = ""
    listeners: dict[str, Listener] | None = None

    def for_listener(self, name: str | None) -> tuple[str, str]:
        """(broker URL, TLS broker URL) for a lookup naming listener ``name`` (or none)."""
        if not self.listeners:
            if name:
                raise UnknownListenerError(f"the broker do not have {name} listener")
            return self.broker_url, self.broker_url_tls
        if not name:
            listener = next(iter(self.listeners.values()))
        else:
            found = self.listeners.get(name)
            if found is None:
                raise UnknownListenerError(f"the broker do not have {name} listener")
            listener = found
        return listener.broker_url, listener.broker_url_tls
