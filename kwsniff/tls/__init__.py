"""TLS layer (sans-IO, between ``tcp/`` and ``kafka/``): record reassembly, handshake
parsing, NSS key log secrets, key schedules and record decryption.

:class:`kwsniff.tls.session.TlsSession` takes one connection's TCP stream bytes per
direction and hands in-order decrypted application data to a callback; what it could
not decrypt is counted and reported, never invented.  Modules: ``keylog`` (NSS key
log files), ``keyschedule`` (TLS 1.2 PRF, TLS 1.3 HKDF-Expand-Label), ``suites``,
``protection`` (record decryption, ``cryptography`` primitives), ``handshake``,
``session``.  (Nothing is imported here: plaintext runs never load ``cryptography``.)
"""
