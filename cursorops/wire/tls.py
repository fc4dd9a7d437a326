"""TLS for both ports: the server's context, and the role a client certificate names.

As Pulsar's ``tlsCertificateFilePath``, ``tlsKeyFilePath``,
``tlsTrustCertsFilePath`` and ``tlsRequireTrustedClientCertOnConnect``: a
client certificate is asked for when trusted certificates are given, required
only when asked to be, and always verified when presented (an untrusted one
fails the handshake). ``AuthenticationProviderTls`` takes the role from the
certificate's common name.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str
    key_file: str
    trust_certs_file: str | None = None
    """CA certificates that client certificates must chain to; None: no client certificates."""
    require_client_cert: bool = False


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.cert_file, settings.key_file)
    if settings.trust_certs_file is not None:
        context.load_verify_locations(settings.trust_certs_file)
        context.verify_mode = (
            ssl.CERT_REQUIRED if settings.require_client_cert else ssl.CERT_OPTIONAL
        )
    elif settings.require_client_cert:
        raise ValueError("Requiring client certificates needs the trusted certificates file")
    return context


def common_name(peercert: Any) -> str | None:
    """The CN of a verified peer certificate (``getpeercert()``'s form); None without one."""
    if not isinstance(peercert, dict):
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and isinstance(value, str) and value:
                return value
    return None
