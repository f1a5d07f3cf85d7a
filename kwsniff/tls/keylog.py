"""NSS key log files (what ``SSLKEYLOGFILE`` makes OpenSSL, BoringSSL, NSS, Python's
``ssl``, Go and rustls write): ``LABEL <client_random hex> <secret hex>`` per line,
``#`` comments. Labels kept: ``CLIENT_RANDOM`` (TLS 1.2 master secret),
``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0`` (TLS 1.3); other labels and
malformed lines are counted in ``ignored``, never fatal.

A :class:`KeyLog` may grow: :meth:`KeyLog.add_file` reads a file from where the last
read of it stopped (live capture: clients write their secrets as they connect), only
complete lines.
"""

from __future__ import annotations

import binascii
import os

LABELS = frozenset({
    "CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0",
})


class KeyLog:
    """Secrets by client random: ``secrets[client_random][label] = secret``."""

    def __init__(self) -> None:
        self.secrets: dict[bytes, dict[str, bytes]] = {}
        self.ignored = 0
        self.files: list[str] = []
        self._read_upto: dict[str, int] = {}
        self._sessions: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self.secrets)

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        return self.secrets.get(client_random)

    def remember_session(self, session_id: bytes, master: bytes) -> None:
        """TLS 1.2 resumption by session id: a later handshake resuming ``session_id``
        whose own client random is not in the log reuses ``master``."""
        if len(self._sessions) < 100_000:
            self._sessions[bytes(session_id)] = master

    def session_master(self, session_id: bytes) -> bytes | None:
        return self._sessions.get(bytes(session_id))

    def add_line(self, line: str) -> bool:
        """Add one line; True when it carried a secret kwsniff uses."""
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            return False
        if len(parts) != 3 or parts[0] not in LABELS:
            self.ignored += 1
            return False
        try:
            cr = binascii.unhexlify(parts[1])
            secret = binascii.unhexlify(parts[2])
        except (binascii.Error, ValueError):
            self.ignored += 1
            return False
        if len(cr) != 32 or not secret:
            self.ignored += 1
            return False
        self.secrets.setdefault(cr, {})[parts[0]] = secret
        return True

    def add_text(self, text: str) -> int:
        """Add every line of ``text``; return how many secrets were added."""
        return sum(self.add_line(ln) for ln in text.splitlines())

    def add_file(self, path: str) -> int:
        """Read ``path`` (from where the previous read stopped); raise OSError when it
        cannot be read. Return the number of secrets added."""
        if path not in self._read_upto:
            self.files.append(path)
        start = self._read_upto.get(path, 0)
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
        end = data.rfind(b"\n") + 1          # complete lines only
        self._read_upto[path] = start + end
        return self.add_text(data[:end].decode("ascii", "replace"))

    def refresh(self) -> int:
        """Re-read every file for lines added since (missing files are skipped)."""
        n = 0
        for p in self.files:
            try:
                n += self.add_file(p)
            except OSError:
                pass
        return n


def from_paths(paths: list[str] | tuple[str, ...], env: bool = True) -> KeyLog | None:
    """A key log of ``paths`` plus ``$SSLKEYLOGFILE`` (when ``env`` and set and readable);
    None when there is none. A given path that cannot be read raises OSError."""
    kl = KeyLog()
    for p in paths:
        kl.add_file(p)
    extra = os.environ.get("SSLKEYLOGFILE") if env else None
    if extra and extra not in paths:
        try:
            kl.add_file(extra)
        except OSError:
            pass
    return kl if kl.files else None

