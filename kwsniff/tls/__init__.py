"""TLS layer (sans-IO, between ``tcp/`` and ``kafka/``): record reassembly, handshake
parsing, NSS key log secrets, key schedules and record decryption.

:class:`~kwsniff.tls.session.TlsSession` takes one connection's TCP stream bytes per
direction and hands in-order decrypted application data to a callback; what it could
not decrypt is counted and reported, never invented.
"""

from kwsniff.tls.keylog import KeyLog
from kwsniff.tls.session import TlsInfo, TlsSession

__all__ = ["KeyLog", "TlsInfo", "TlsSession"]
