"""Resynchronisation checks: may a frame start here? (a mixin of Conversation)

Contract: ``_check(d, buf, pos, end) -> (verdict, size)`` judges a candidate frame start
in direction ``d`` for :class:`kwsniff.kafka.framing.Framer` (NO, WEAK, STRONG, SHORT):
requests need a plausible header with a growing correlation id and are STRONG when they
decode exactly; responses need a plausible size and a growing correlation id and are
STRONG when the id is a waiting request's and the frame decodes (all but a few bytes) as
its response; 0.7 requests are STRONG when they parse exactly; in raw SASL mode (after a
v0 SaslHandshake) a whole token of the connection's mechanism that decodes without a
problem is STRONG in either direction.  Never raises.
"""

from __future__ import annotations

import struct
from typing import Any

from kwsniff.kafka import decoding, legacy07, plausible
from kwsniff.kafka.conv_orphans import OrphanHandling
from kwsniff.kafka.conv_state import CORR_SPREAD, KAFKA, KAFKA07, corr_after
from kwsniff.kafka.framing import NO, SHORT, STRONG, WEAK

_I32 = struct.Struct(">i")
_KEY_VER_CORR_CID = struct.Struct(">hhih")
#: client ids longer than this that do not fit in a request's first segment are suspicious
LONG_CLIENT_ID = 1024
#: largest raw SASL token the resynchronisation looks for (GSSAPI tokens are a few KB)
SASL_TOKEN_MAX = 65536


class ResyncChecks(OrphanHandling):
    """Candidate-start judgement for the two framers of a conversation."""

    __slots__ = ()

    state: str
    client_dir: int | None
    ctx: Any
    pending: dict
    last_req_corr: int | None
    last_resp_corr: int | None
    corr_hi: int | None
    sasl_raw: bool
    summary: Any

    def _check0(self, buf: bytearray, pos: int, end: int) -> tuple[int, int]:
        return self._check(0, buf, pos, end)

    def _check1(self, buf: bytearray, pos: int, end: int) -> tuple[int, int]:
        return self._check(1, buf, pos, end)

    def _sasl_token_at(self, d: int, buf: bytearray, pos: int, end: int
                       ) -> tuple[int, int] | None:
        """STRONG for a whole raw SASL token (after a v0 SaslHandshake) of the
        connection's mechanism that decodes without a problem; None otherwise (the Kafka
        checks decide)."""
        if end - pos < 4:
            return None
        size = _I32.unpack_from(buf, pos)[0]
        if size <= 0 or size > SASL_TOKEN_MAX or pos + 4 + size > end:
            return None
        token = bytes(buf[pos + 4:pos + 4 + size])
        if decoding.sasl_token_clean(token, self.summary.sasl_mechanism,
                                     d == self.client_dir) is None:
            return None
        return STRONG, size

    def _not_a_request(self, buf: bytearray, pos: int, end: int) -> bool:
        """The client framer's guard (see ``Framer.guard``): True when the bytes at
        ``pos`` (a size prefix whose frame continues in later segments) cannot start a
        request: not a plausible header, and not one of an unknown API key either (any
        key and version in range, a correlation id >= 0, a whole printable client id, or
        one of at most ``LONG_CLIENT_ID`` bytes that runs past the bytes there).
        False in raw SASL mode and while too few bytes are there to tell."""
        if self.sasl_raw or self.state != KAFKA or end - pos < 14:
            return False
        if plausible.request_header_at(buf, pos, end, self.ctx.options.max_frame) is not None:
            return False
        size = _I32.unpack_from(buf, pos)[0]
        key, version, corr, cid = _KEY_VER_CORR_CID.unpack_from(buf, pos + 4)
        if key < 0 or not 0 <= version <= 127 or corr < 0 or cid < -1 or cid > size - 10:
            return True
        if pos + 14 + cid > end:
            # a client id running past the segment: only a long one is suspicious
            return cid > LONG_CLIENT_ID
        return cid > 0 and not plausible.client_id_ok(buf, pos + 14, cid)

    def _unknown_first_request(self, d: int, buf: bytearray, pos: int, end: int
                               ) -> tuple[int, int]:
        """WEAK for the first frame of the client's bytes when it is a request of an API
        key the schema table does not know (vendor keys, a newer Kafka's) with a
        well-formed header: a size of at least a header, a version up to 127, a
        correlation id >= 0, a whole printable client id.  The framer accepts it only
        when its framing is confirmed (the next frame a plausible request with a growing
        correlation id, or the end of the stream); elsewhere in a stream such a header
        is NO, as before (hunting must not take record bytes for a start)."""
        fr = self.framers[d]
        if fr.base + pos != fr.first_offset or fr.gap_bytes or end - pos < 14:
            return NO, 0
        size = _I32.unpack_from(buf, pos)[0]
        key, version, corr, cid = _KEY_VER_CORR_CID.unpack_from(buf, pos + 4)
        if plausible.max_version(key) >= 0 or key < 0 or not 0 <= version <= 127 or \
                corr < 0 or size < plausible.MIN_REQUEST_SIZE or \
                size > self.ctx.options.max_frame or cid < -1 or cid > size - 10:
            return NO, 0
        if cid > 0 and (pos + 14 + cid > end or not plausible.client_id_ok(buf, pos + 14, cid)):
            return NO, 0
        if not corr_after(corr, self.last_req_corr):
            return NO, 0
        if pos + 4 + size > end and size <= self.ctx.options.window:
            return SHORT, size
        return WEAK, size

    def _not_a_response(self, buf: bytearray, pos: int, end: int) -> bool:
        """The broker framer's guard (see ``Framer.guard``): True when the bytes at
        ``pos`` cannot start a response (the hunting check says NO: a correlation id that
        is not waiting and does not follow the last response's), or, while every request
        of the connection was seen (no hole, nothing skipped, no resynchronisation on
        probation), an id above every request's. False in raw SASL mode."""
        if self.sasl_raw or self.state != KAFKA or self.client_dir is None:
            return False
        if self._check(1 - self.client_dir, buf, pos, end)[0] == NO:
            return True
        hi = self.corr_hi
        if hi is None or end - pos < 8:
            return False
        corr = _I32.unpack_from(buf, pos + 4)[0]
        if corr <= hi or corr in self.pending:
            return False
        c = self.framers[self.client_dir]
        return c.gaps == 0 and c.skipped_bytes == 0 and not c.probation and not c.held

    def _check(self, d: int, buf: bytearray, pos: int, end: int) -> tuple[int, int]:
        """Hunting verdict for a frame start at ``pos`` in direction ``d``."""
        max_frame = self.ctx.options.max_frame
        if self.state == KAFKA07:
            if d == self.client_dir:
                if end - pos < 6:
                    return SHORT, 0
                size = _I32.unpack_from(buf, pos)[0]
                if size < 8 or size > max_frame:
                    return NO, 0
                if pos + 4 + size > end:
                    return (SHORT, 0) if buf[pos + 4] == 0 and buf[pos + 5] <= 4 else (NO, 0)
                got = legacy07.plausible_request_at(buf, pos, end, max_frame)
                return (STRONG, got) if got is not None else (NO, 0)
            got = legacy07.plausible_response_at(buf, pos, end, max_frame)
            return (WEAK, got) if got is not None else ((SHORT, 0) if end - pos < 6 else (NO, 0))
        if self.sasl_raw:
            got = self._sasl_token_at(d, buf, pos, end)
            if got is not None:
                return got
        if d == self.client_dir:
            h = plausible.request_header_at(buf, pos, end, max_frame)
            if h is None:
                if end - pos < plausible.request_prefix_needed(buf, pos, end):
                    return SHORT, 0
                return self._unknown_first_request(d, buf, pos, end)
            size = h[0]
            if not corr_after(h[3], self.last_req_corr):
                return NO, 0
            if pos + 4 + size > end:
                return (SHORT, size) if size <= self.ctx.options.window else (WEAK, size)
            if decoding.decodes_exactly(decoding.decode_request(bytes(buf[pos + 4:pos + 4 + size]))):
                return STRONG, size
            return WEAK, size
        h2 = plausible.response_size_at(buf, pos, end, max_frame)
        if h2 is None:
            return (SHORT, 0) if end - pos < 8 else (NO, 0)
        size, corr = h2
        waiting = self.pending.get(corr)
        if waiting is not None:
            # small ids are common in binary data: the frame must also decode (all but a
            # few bytes) as the answer to that request
            if pos + 4 + size <= end:
                req = waiting.msg
                if req.api_key is not None and req.api_version is not None and \
                        decoding.decodes_nearly(decoding.try_response(
                            bytes(buf[pos + 4:pos + 4 + size]), req.api_key, req.api_version)):
                    return STRONG, size
                return WEAK, size
            if size <= self.ctx.options.window:
                return SHORT, size
            return WEAK, size
        # responses come in request order and correlation ids grow on a connection
        if not corr_after(corr, self.last_resp_corr):
            return NO, 0
        hi = self.corr_hi
        if hi is not None and corr > hi + CORR_SPREAD:
            return NO, 0
        return WEAK, size
