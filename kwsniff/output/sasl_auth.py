"""SASL authentication attempts and their outcomes (for ``kwsniff stats``).

A broker can refuse a login in three places: the SaslHandshake error code (mechanism
not enabled), the SaslAuthenticate error code, or only inside the mechanism's own token
with Kafka error code 0 (a SCRAM server-final ``e=unknown-user``, an OAUTHBEARER error
document; raw tokens after a v0 handshake have no error code at all). This module reads
all three.

Contract:

* :func:`sasl_tokens`, :func:`sasl_mechanism`, :func:`sasl_user`, :func:`sasl_error` read
  the decoded SASL tokens of one exchange (also the display filter's ``sasl_*`` fields).
* :class:`AuthTracker` takes exchanges in output order (``add(facts)``). An *attempt*
  starts on a connection with a SaslHandshake, or with a SaslAuthenticate / raw token
  exchange when none is open there, and collects the steps that follow. Its outcome:

  * ``failed``: a non-zero SaslHandshake/SaslAuthenticate error code, or an error inside
    a broker token; the reason names it (``SASL error unknown-user``,
    ``SASL_AUTHENTICATION_FAILED: <ErrorMessage>``, ``UNSUPPORTED_SASL_MECHANISM``);
  * ``succeeded``: the mechanism's last message came back without an error (SCRAM
    server-final ``v=``, PLAIN and OAUTHBEARER answered with error code 0 / an empty
    raw token), or the connection went on with other Kafka requests (GSSAPI, or an
    outcome the tokens do not show);
  * ``no response``: a step's request was not answered (a broker that closes the
    connection on a refused mechanism);
  * ``unfinished``: in progress when the capture (or the connection's exchanges) ends.

* Memory is bounded: at most ``limit`` attempts are open at once (the oldest is closed
  as ``unfinished`` beyond); closed attempts are counted by (mechanism, user, client id,
  outcome, reason) in at most ``limit`` rows (the rarest half dropped when full, and the
  report says so).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kwsniff.kafka.sasl import token_error, token_user
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.names import SASL_PROTOCOL, error_label

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18

SUCCEEDED, FAILED, NO_RESPONSE, UNFINISHED = "succeeded", "failed", "no response", "unfinished"
OUTCOMES = (FAILED, NO_RESPONSE, UNFINISHED, SUCCEEDED)      # report order


# ----------------------------------------------------------------------------- one exchange

def _token_data(body: Any) -> dict[str, Any] | None:
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, dict) else None


def _side_token(f: ExchangeFacts, msg: Any) -> dict[str, Any] | None:
    body = msg.body if msg is not None else None
    if not isinstance(body, dict):
        return None
    if f.exchange.protocol == SASL_PROTOCOL:
        return _token_data(body)
    if msg.api_key == SASL_AUTHENTICATE:
        return _token_data(body.get("_decoded_AuthBytes"))
    return None


def sasl_tokens(f: ExchangeFacts) -> list[dict[str, Any]]:
    """The decoded SASL tokens of an exchange (SaslAuthenticate ``AuthBytes``, raw tokens
    after a v0 handshake), request first."""
    ex = f.exchange
    return [d for d in (_side_token(f, ex.request), _side_token(f, ex.response)) if d]


def sasl_mechanism(f: ExchangeFacts) -> str | None:
    """The mechanism a SaslHandshake asks for, or the one a token belongs to."""
    req = f.exchange.request
    if req is not None and req.api_key == SASL_HANDSHAKE and f.exchange.protocol != SASL_PROTOCOL \
            and isinstance(req.body, dict):
        mech = req.body.get("Mechanism")
        return mech if isinstance(mech, str) else None
    for data in sasl_tokens(f):
        if isinstance(data.get("mechanism"), str):
            return data["mechanism"]
    return None


def sasl_user(f: ExchangeFacts) -> str | None:
    """The user a token of the exchange names, if any."""
    return next(filter(None, map(token_user, sasl_tokens(f))), None)


def sasl_error(f: ExchangeFacts) -> str | None:
    """The error inside a token of the exchange (``"error"`` when it has no text)."""
    for data in sasl_tokens(f):
        error = token_error(data)
        if error is not None:
            return error or "error"
    return None


def _error_reason(body: Any) -> str | None:
    """``NAME`` or ``NAME: message`` for a non-zero top-level ErrorCode, else None."""
    if not isinstance(body, dict):
        return None
    code = body.get("ErrorCode")
    if type(code) is not int or code == 0:
        return None
    reason = error_label(code)
    message = body.get("ErrorMessage")
    if isinstance(message, str) and message and message.upper() != "NONE":
        reason += f": {message}"
    offered = body.get("Mechanisms")             # (a SaslHandshake refusal lists them)
    if isinstance(offered, list):
        reason += f" (broker offers {', '.join(map(str, offered)) or 'none'})"
    return reason


def _final(mechanism: str | None, response_token: dict[str, Any] | None) -> bool:
    """Whether an answered step without an error ends the mechanism's exchange."""
    mech = (mechanism or "").upper()
    if mech.startswith("SCRAM"):
        return response_token is not None and response_token.get("message") == "server-final"
    return mech in ("PLAIN", "OAUTHBEARER")


# ----------------------------------------------------------------------------- attempts

class _Attempt:
    """An attempt in progress on one connection."""

    __slots__ = ("stream", "client_id", "mechanism", "user", "steps")

    def __init__(self, stream: int, client_id: str | None) -> None:
        self.stream = stream
        self.client_id = client_id
        self.mechanism: str | None = None
        self.user: str | None = None
        self.steps = 0


class AuthTracker:
    """SASL attempts per connection and their outcomes; see the module contract."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = max(2, limit)
        # stream -> attempt in progress, oldest first (an OrderedDict: its first key is
        # found in O(1) after the keys before it were removed, a dict's is not)
        self.open: OrderedDict[int, _Attempt] = OrderedDict()
        self.rows: dict[tuple[Any, ...], list[int]] = {}   # key -> [attempts, first stream]
        self.outcomes: dict[str, int] = {o: 0 for o in OUTCOMES}
        self.dropped_rows = 0

    def add(self, facts: ExchangeFacts) -> None:
        ex = facts.exchange
        req = ex.request
        sasl_raw = ex.protocol == SASL_PROTOCOL
        key = ex.api_key
        if not sasl_raw and key != SASL_HANDSHAKE and key != SASL_AUTHENTICATE:
            if self.open and req is not None and key is not None and key != API_VERSIONS:
                attempt = self.open.get(ex.stream)
                if attempt is not None and ex.protocol == "kafka":
                    self._close(attempt, SUCCEEDED, "Kafka requests followed on the "
                                                    "connection")
            return
        stream = ex.stream
        attempt = self.open.get(stream)
        if attempt is None or (key == SASL_HANDSHAKE and not sasl_raw and attempt.steps):
            if attempt is not None:
                self._close(attempt, UNFINISHED, "a new SaslHandshake began")
            attempt = self.open[stream] = _Attempt(stream, ex.client_id)
            if len(self.open) > self.limit:
                oldest = next(iter(self.open))
                self._close(self.open[oldest], UNFINISHED,
                            f"more than {self.limit} attempts were open at once")
        attempt.steps += 1
        attempt.client_id = attempt.client_id or ex.client_id
        attempt.mechanism = sasl_mechanism(facts) or attempt.mechanism
        attempt.user = attempt.user or sasl_user(facts)
        self._step(attempt, facts, sasl_raw)

    def _step(self, attempt: _Attempt, facts: ExchangeFacts, sasl_raw: bool) -> None:
        ex = facts.exchange
        resp = ex.response
        what = "SASL token" if sasl_raw else ("SaslHandshake" if ex.api_key == SASL_HANDSHAKE
                                              else "SaslAuthenticate")
        if ex.request is None:
            return                         # a response whose request was not captured
        if resp is None:
            self._close(attempt, NO_RESPONSE, f"the {what} was not answered")
            return
        reason = None if sasl_raw else _error_reason(resp.body)
        if reason is not None:
            self._close(attempt, FAILED, reason)
            return
        error = sasl_error(facts)
        if error is not None:
            self._close(attempt, FAILED, f"SASL error {error}")
            return
        if ex.api_key == SASL_HANDSHAKE and not sasl_raw:
            return
        if _final(attempt.mechanism, _side_token(facts, resp)):
            self._close(attempt, SUCCEEDED, "")

    def _close(self, attempt: _Attempt, outcome: str, reason: str) -> None:
        if self.open.get(attempt.stream) is attempt:
            del self.open[attempt.stream]
        self.outcomes[outcome] += 1
        key = (attempt.mechanism, attempt.user, attempt.client_id, outcome, reason)
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= self.limit:
                self._shrink()
            self.rows[key] = [1, attempt.stream]
        else:
            row[0] += 1

    def _shrink(self) -> None:
        keep = sorted(self.rows.items(), key=lambda kv: -kv[1][0])[: self.limit // 2]
        self.dropped_rows += len(self.rows) - len(keep)
        self.rows = dict(keep)

    def report(self, top: int | None = None) -> dict[str, Any]:
        """Attempts as plain data: counts per outcome and rows of (mechanism, user, client
        id, outcome, reason) with their attempts, failures first; attempts still open are
        reported ``unfinished`` (the tracker itself is not changed)."""
        outcomes = dict(self.outcomes)
        rows = {k: list(v) for k, v in self.rows.items()}
        for attempt in self.open.values():
            outcomes[UNFINISHED] += 1
            key = (attempt.mechanism, attempt.user, attempt.client_id, UNFINISHED,
                   "no outcome before the end of the capture")
            row = rows.setdefault(key, [0, attempt.stream])
            row[0] += 1
        order = {o: i for i, o in enumerate(OUTCOMES)}
        ranked = sorted(rows.items(), key=lambda kv: (order[kv[0][3]], -kv[1][0], kv[1][1]))
        return {
            "attempts": sum(outcomes.values()),
            "outcomes": outcomes,
            "rows": [{"mechanism": k[0], "user": k[1], "client_id": k[2], "outcome": k[3],
                      "reason": k[4] or None, "attempts": v[0], "first_stream": v[1]}
                     for k, v in (ranked if top is None else ranked[:top])],
            "rows_seen": len(rows) + self.dropped_rows,
            "approximate": self.dropped_rows > 0,
        }
