"""One TLS connection, sans-IO: records per direction, handshake, keys, decryption.

Contract:

* ``TlsSession(keylog, on_data, on_gap, client_dir)``; feed each direction's stream
  bytes in order with :meth:`data` and holes with :meth:`gap`.  Decrypted application
  data is handed on in order as ``on_data(direction, offset, plaintext, frame, ts)``
  (``offset`` counts plaintext bytes of that direction; ``frame``/``ts`` are those of
  the record's last byte); plaintext that will never come (lost or undecryptable
  records) as ``on_gap(direction, offset, length, frame, ts, reason)``, where ``length``
  is the ciphertext length lost (the plaintext length is unknowable).  Nothing is
  invented: a record that does not authenticate is reported, not passed on.
* :attr:`info` (:class:`TlsInfo`) says what the handshake showed and what happened:
  version, suite, SNI, ALPN, session id, certificate subject, whether keys were found,
  records and bytes decrypted and not decrypted.
* After a gap the direction is searched for the next record that authenticates under
  a later sequence number (:meth:`TlsSession._resync`); until then nothing of it is
  decrypted.
* :attr:`hopeless` is True once encrypted records flow and no key can decrypt them
  (the caller may stop feeding); it never raises on bad bytes.
* ``live=True``: the secrets may reach the key log after the handshake is seen (a
  client writes them as it connects): while a key is missing, the first
  :data:`LIVE_RETRIES` encrypted records make the key log files be read again, and the
  keys found then apply from that record on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from kwsniff.tls import handshake as hs
from kwsniff.tls.keylog import KeyLog
from kwsniff.tls.protection import Tls13Cipher, Undecryptable, tls12_ciphers
from kwsniff.tls.suites import SUITES, suite_name, version_name

CCS, ALERT, HANDSHAKE, APPDATA = 20, 21, 22, 23
MIN_RECORD = 22                        # header, tag and content type: bytes per record at least
MAX_TRIALS = 4096                      # sequence numbers tried when resynchronising
LIVE_RETRIES = 8                       # encrypted records that re-read the key log (live)
MAX_RECORD = (1 << 14) + 2048          # largest TLSCiphertext fragment (RFC 5246: 2^14 + 2048)
_HDR = struct.Struct(">BHH")


@dataclass(slots=True)
class TlsInfo:
    """What one TLS connection showed (see the module docstring)."""

    version: int | None = None
    suite: int | None = None
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    session_id: bytes = b""
    subject: str | None = None
    client_random: bytes = b""
    server_random: bytes = b""
    hrr: bool = False
    resumed: bool = False
    key: str = "none"                  # none / found / missing / unsupported suite
    decrypted_records: int = 0
    undecrypted_records: int = 0
    decrypted_bytes: list[int] = field(default_factory=lambda: [0, 0])
    decrypted_record_bytes: int = 0    # TLS record bytes (header + ciphertext) decrypted
    problems: list[str] = field(default_factory=list)

    @property
    def version_name(self) -> str | None:
        return version_name(self.version)

    @property
    def suite_name(self) -> str | None:
        return suite_name(self.suite)

    def to_dict(self) -> dict[str, Any]:
        """The ``tls`` object of JSON output."""
        d: dict[str, Any] = {"version": self.version_name, "suite": self.suite_name,
                             "sni": self.sni}
        if self.alpn:
            d["alpn"] = list(self.alpn)
        if self.subject:
            d["subject"] = self.subject
        d["decrypted"] = self.key == "found"
        return d

    def describe(self) -> str:
        """One line: ``TLS 1.3, TLS_AES_128_GCM_SHA256, SNI kafka.local``."""
        parts = [self.version_name or "TLS (version unknown)"]
        if self.suite is not None:
            parts.append(self.suite_name or "")
        parts.append(f"SNI {self.sni}" if self.sni else "no SNI")
        if self.alpn:
            parts.append("ALPN " + "/".join(self.alpn))
        if self.subject:
            parts.append(f"certificate {self.subject}")
        return ", ".join(parts)


class _Dir:
    __slots__ = ("buf", "cipher", "pending", "encrypted", "lost", "plain_off", "hsr",
                 "records", "trial", "enc_records", "resync", "lost_bytes")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.cipher: Any = None         # current record protection (None: plaintext)
        self.pending: Any = None        # TLS 1.2: activated by ChangeCipherSpec
        self.encrypted = False          # records of this direction are protected
        self.lost = False               # a hole: record boundaries or sequence unknown
        self.plain_off = 0
        self.hsr = hs.HandshakeReader()
        self.records = 0
        self.trial = False              # TLS 1.3 traffic keys tried before their first record
        self.enc_records = 0            # protected records seen (their sequence numbers)
        self.resync = False             # lost, but looking for the stream again
        self.lost_bytes = 0


class TlsSession:
    """See the module docstring."""

    def __init__(self, keylog: KeyLog | None, on_data: Callable, on_gap: Callable,
                 client_dir: int | None = None, live: bool = False) -> None:
        self.keylog = keylog
        self.on_data = on_data
        self.on_gap = on_gap
        self.client_dir = client_dir
        self.live = live
        self.info = TlsInfo()
        self.dirs = (_Dir(), _Dir())
        self.secrets: dict[str, bytes] | None = None
        self.tls13 = False
        self.suite = None
        self._app13: dict[int, Tls13Cipher | None] = {}
        self.client_hello: hs.Hello | None = None
        self._server: tuple[int, hs.Hello] | None = None     # (direction, ServerHello)
        self._retries = 0

    # ------------------------------------------------------------------ input
    @property
    def hopeless(self) -> bool:
        """Encrypted records flow and no key decrypts them."""
        if self.live and self.info.key == "missing" and self._retries < LIVE_RETRIES:
            return False
        return self.info.key in ("missing", "unsupported suite") and any(
            d.encrypted for d in self.dirs)

    def data(self, d: int, data: bytes | memoryview, frame: int, ts: float) -> None:
        st = self.dirs[d]
        if st.lost:
            if not st.resync:
                return
            st.buf += data
            if not self._resync(d, frame):
                return
        buf = st.buf
        if not st.lost:
            buf += data
        st.lost = False
        p = 0
        n = len(buf)
        while n - p >= 5:
            ctype, version, length = _HDR.unpack_from(buf, p)
            if not (20 <= ctype <= 24) or (version >> 8) != 3 or length > MAX_RECORD:
                self._lose(d, n - p, frame, ts, f"not a TLS record at stream byte {p}")
                del buf[:]
                return
            if n - p - 5 < length:
                break
            frag = bytes(buf[p + 5:p + 5 + length])
            p += 5 + length
            self._record(d, ctype, version, frag, frame, ts)
            if st.lost:
                break
        del buf[:p]

    def gap(self, d: int, length: int, frame: int, ts: float, reason: str) -> None:
        st = self.dirs[d]
        lost = length + len(st.buf)
        if not st.lost:
            self._lose(d, lost, frame, ts, reason)
            # a protected stream may be found again: the next record that authenticates
            # under a later sequence number (see _resync)
            st.resync = st.cipher is not None and self.info.key == "found"
            st.lost_bytes = 0
        st.lost_bytes += lost
        st.buf = bytearray()

    def _resync(self, d: int, frame: int) -> bool:
        """After a gap: find a record in the buffered bytes that authenticates under one
        of the sequence numbers the lost bytes can have used (each record takes at least
        :data:`MIN_RECORD` bytes, at most :data:`MAX_TRIALS` are tried); on success the
        buffer starts at that record and the cipher has its sequence number."""
        st = self.dirs[d]
        buf = st.buf
        cipher = st.cipher
        base = cipher.seq
        span = min(MAX_TRIALS, (st.lost_bytes + len(buf)) // MIN_RECORD + 2)
        p = 0
        n = len(buf)
        while True:
            p = buf.find(b"\x17\x03\x03", p)
            if p < 0 or n - p < 5:
                break
            length = int.from_bytes(buf[p + 3:p + 5], "big")
            if length > MAX_RECORD or length < 17:
                p += 1
                continue
            if n - p - 5 < length:
                break                           # wait for the whole candidate record
            frag = bytes(buf[p + 5:p + 5 + length])
            for seq in range(base, base + span):
                cipher.seq = seq
                try:
                    cipher.open(23, 0x0303, frag)
                except Undecryptable:
                    continue
                cipher.seq = seq
                st.lost_bytes += p
                del buf[:p]
                st.resync = False
                self.info.problems.append(
                    f"frame {frame}: the {self._side(d)} TLS stream found again after "
                    f"{st.lost_bytes} lost bytes ({seq - base} records skipped)")
                return True
            p += 1
        cipher.seq = base
        keep = MAX_RECORD + 5                   # a candidate may still be arriving
        if n > 2 * keep:
            st.lost_bytes += n - keep
            del buf[:n - keep]
        return False

    def _lose(self, d: int, length: int, frame: int, ts: float, reason: str) -> None:
        """Record boundaries (and the sequence number) of direction ``d`` are lost."""
        st = self.dirs[d]
        st.lost = True
        self.info.problems.append(f"frame {frame}: {reason}; {self._side(d)} TLS records "
                                  "lost (not decrypted until one authenticates again)")
        if st.cipher is not None or st.encrypted:
            self.on_gap(d, st.plain_off, length, frame, ts, "TLS records lost")
            st.plain_off += length

    def _side(self, d: int) -> str:
        return "client" if d == self.client_dir else "server"

    # ---------------------------------------------------------------- records
    def _record(self, d: int, ctype: int, version: int, frag: bytes, frame: int,
                ts: float) -> None:
        st = self.dirs[d]
        st.records += 1
        if ctype == CCS:
            if not self.tls13:
                st.encrypted = True
                st.cipher = st.pending
                st.pending = None
                if st.cipher is None:
                    self._need_keys(frame)
            return
        if st.encrypted:
            st.enc_records += 1
        if not st.encrypted:
            if ctype == HANDSHAKE:
                for mtype, body in st.hsr.feed(frag):
                    self._handshake(d, mtype, body, frame)
            elif ctype == APPDATA:
                self.info.undecrypted_records += 1
            return
        cipher = st.cipher
        if cipher is None and self.live and self.info.key == "missing" \
                and self._retries < LIVE_RETRIES:
            self._retries += 1
            cipher = self._late_keys(d)
        if cipher is None:
            self.info.undecrypted_records += 1
            if ctype == APPDATA:
                self.on_gap(d, st.plain_off, len(frag), frame, ts, "TLS record without key")
                st.plain_off += len(frag)
            return
        try:
            inner, plain = cipher.open(ctype, version, frag)
        except Undecryptable as err:
            alt = self._app13.get(d)
            if alt is not None and cipher is not alt:
                # handshake secret absent or wrong: try the application secret
                try:
                    inner, plain = alt.open(ctype, version, frag)
                    st.cipher = alt
                    self._app13[d] = None
                except Undecryptable:
                    alt.seq = 0
                    self._bad(d, frag, frame, ts, str(err))
                    return
            else:
                if st.trial:
                    cipher.seq -= 1             # (an encrypted handshake record: not ours)
                self._bad(d, frag, frame, ts, str(err))
                return
        st.trial = False
        self.info.decrypted_records += 1
        self.info.decrypted_record_bytes += 5 + len(frag)
        if inner == APPDATA:
            if plain:
                self.info.decrypted_bytes[d] += len(plain)
                self.on_data(d, st.plain_off, plain, frame, ts)
                st.plain_off += len(plain)
        elif inner == HANDSHAKE:
            for mtype, body in st.hsr.feed(plain):
                self._handshake(d, mtype, body, frame)

    def _bad(self, d: int, frag: bytes, frame: int, ts: float, why: str) -> None:
        st = self.dirs[d]
        self.info.undecrypted_records += 1
        if len(self.info.problems) < 20:
            self.info.problems.append(f"frame {frame}: {self._side(d)} TLS record of "
                                      f"{len(frag)} bytes not decrypted ({why})")
        self.on_gap(d, st.plain_off, len(frag), frame, ts, f"TLS record not decrypted ({why})")
        st.plain_off += len(frag)

    # -------------------------------------------------------------- handshake
    def _handshake(self, d: int, mtype: int, body: bytes, frame: int) -> None:
        info = self.info
        if mtype == hs.CLIENT_HELLO:
            h = hs.parse_hello(body, server=False)
            if self.client_dir is None:
                self.client_dir = d
            self.client_hello = h
            info.client_random = h.random
            info.sni = h.sni
            info.session_id = h.session_id
            if h.problem:
                info.problems.append(f"frame {frame}: {h.problem}")
        elif mtype == hs.SERVER_HELLO:
            h = hs.parse_hello(body, server=True)
            if self.client_dir is None:
                self.client_dir = 1 - d
            if h.problem:
                info.problems.append(f"frame {frame}: {h.problem}")
            if h.is_hrr:
                info.hrr = True
                return                          # a second ClientHello follows
            info.server_random = h.random
            info.suite = h.suite
            info.version = h.versions[0] if h.versions else h.legacy_version
            info.alpn = h.alpn
            ch = self.client_hello
            if ch is not None and ch.session_id and ch.session_id == h.session_id \
                    and info.version != 0x0304:
                info.resumed = True
            self._server_hello(d, h, frame)
        elif mtype == hs.CERTIFICATE and d != self.client_dir and info.subject is None:
            subjects = hs.certificate_subjects(body, self.tls13)
            if subjects:
                info.subject = subjects[0]
        elif mtype == hs.FINISHED and self.tls13:
            app = self._app13.get(d)
            st = self.dirs[d]
            if app is not None:
                st.cipher = app
                self._app13[d] = None
            elif st.cipher is not None and d in self._app13:
                st.cipher = None                # no traffic secret for this direction
        elif mtype == hs.KEY_UPDATE and self.tls13:
            st = self.dirs[d]
            if st.cipher is not None:
                st.cipher = st.cipher.updated()

    def _late_keys(self, d: int):
        """Live: read the key logs again; the keys found apply from this record on
        (directions already past records of theirs keep their count as sequence)."""
        if self._server is None or self.keylog is None or not self.keylog.refresh():
            return None
        sd, h = self._server
        self._server_hello(sd, h, 0)
        if self.info.key != "found":
            return None
        for x, st in enumerate(self.dirs):
            if not self.tls13 and st.encrypted and st.cipher is None:
                st.cipher, st.pending = st.pending, None       # ChangeCipherSpec was seen
            if st.cipher is not None:
                st.cipher.seq = st.enc_records - (1 if x == d else 0)
        return self.dirs[d].cipher

    def _server_hello(self, sd: int, h: hs.Hello, frame: int) -> None:
        self._server = (sd, h)
        info = self.info
        suite = SUITES.get(h.suite) if h.suite is not None else None
        self.suite = suite
        cd = 1 - sd
        self.tls13 = info.version == 0x0304
        if self.tls13:
            # every later record of both directions is protected (but compatibility CCS)
            for d in (0, 1):
                self.dirs[d].encrypted = True
            sec = self._lookup()
            if suite is None:
                info.key = "unsupported suite"
                return
            if sec is None:
                info.key = "missing"
                return
            names = {cd: ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"),
                     sd: ("SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0")}
            found = False
            for d, (hs_name, app_name) in names.items():
                st = self.dirs[d]
                hsec, asec = sec.get(hs_name), sec.get(app_name)
                st.cipher = Tls13Cipher(suite, hsec) if hsec else None
                self._app13[d] = Tls13Cipher(suite, asec) if asec else None
                if st.cipher is None and self._app13[d] is not None:
                    # no handshake secret: find the first application record by trial
                    st.cipher = self._app13[d]
                    st.trial = True
                    self._app13[d] = None
                found = found or st.cipher is not None
            info.key = "found" if found else "missing"
            return
        # TLS 1.2 and older: keys wait for each side's ChangeCipherSpec
        if suite is None:
            info.key = "unsupported suite"
            return
        master = self._master()
        if master is None:
            info.key = "missing"
            return
        ch = self.client_hello
        etm = bool(h.etm and ch is not None and ch.etm and suite.kind == "cbc")
        c, s = tls12_ciphers(suite, master, info.client_random, info.server_random, etm)
        self.dirs[cd].pending = c
        self.dirs[sd].pending = s
        info.key = "found"
        if self.keylog is not None and info.session_id:
            self.keylog.remember_session(info.session_id, master)

    def _lookup(self) -> dict[str, bytes] | None:
        kl = self.keylog
        if kl is None or not self.info.client_random:
            return None
        sec = kl.get(self.info.client_random)
        if sec is None and self.live:
            kl.refresh()
            sec = kl.get(self.info.client_random)
        return sec

    def _master(self) -> bytes | None:
        sec = self._lookup()
        if sec is not None and "CLIENT_RANDOM" in sec:
            return sec["CLIENT_RANDOM"]
        if self.info.resumed and self.keylog is not None:
            return self.keylog.session_master(self.info.session_id)
        return None

    def _need_keys(self, frame: int) -> None:
        if self.info.key == "none":
            self.info.key = "missing"
