"""Summary lines: one line per exchange, in capture order (``kwsniff decode``).

Contract: :class:`SummaryFormatter.format` returns one line (no newline)::

    #   time      client → broker              client id  API vN   corr  latency  digest
    7   0.003215 10.0.0.1:51234 → 10.0.0.2:9092 rdkafka Produce v9 #7 3.20 ms orders[0..2] …

* time: relative to the first exchange (``-t r``, default), absolute local time (``a``),
  absolute with date (``ad``), UTC with date (``ud``) or epoch seconds (``e``);
* errors found in the response are shown by name after the latency;
* decode problems are flagged with ``[N problems]`` at the end (those of the exchange,
  its messages and its record sets' batch-header and CRC checks, as in the export);
* colour comes from the :class:`~kwsniff.output.color.Palette` (plain when piped).
"""

from __future__ import annotations

import re
import time as _time

from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.output.color import PLAIN, Palette
from kwsniff.output.digest import ARROW, describe_api, digest
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import format_address
from kwsniff.output.names import error_label

TIME_FORMATS = ("r", "a", "ad", "ud", "e")

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``, ...): strings from
    the wire (client ids, topics, problems) must not break lines or drive the terminal."""
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"
                                               if ord(m.group()) < 256
                                               else f"\\u{ord(m.group()):04x}"), text)


def format_time(ts: float, mode: str, start: float) -> str:
    """A timestamp in one of :data:`TIME_FORMATS`."""
    if mode == "r":
        return f"{ts - start:.6f}"
    if mode == "e":
        return f"{ts:.6f}"
    micros = int(round((ts % 1) * 1_000_000))
    secs = int(ts)
    if micros >= 1_000_000:
        secs += 1
        micros -= 1_000_000
    try:
        st = _time.gmtime(secs) if mode == "ud" else _time.localtime(secs)
    except (OverflowError, OSError, ValueError):   # beyond the platform's calendar
        return f"{ts:.6f}"
    if mode == "a":
        return _time.strftime("%H:%M:%S", st) + f".{micros:06d}"
    return _time.strftime("%Y-%m-%d %H:%M:%S", st) + f".{micros:06d}"


def format_latency(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms"
    return f"{ms / 1000:.2f} s"


#: entries each of the formatter's caches of connection routes, client ids and API labels
#: holds before it is cleared (a capture has few of each, so it rarely is)
CACHE_LIMIT = 4096


class SummaryFormatter:
    """Formats summary lines; remembers the first timestamp for relative times, and the
    coloured route, client id and API label texts already made (the same few recur on
    every line)."""

    def __init__(self, palette: Palette = PLAIN, time_format: str = "r",
                 start_ts: float | None = None) -> None:
        if time_format not in TIME_FORMATS:
            raise ValueError(f"time format must be one of {', '.join(TIME_FORMATS)}")
        self.palette = palette
        self.time_format = time_format
        self.start_ts = start_ts
        self._routes: dict[tuple, str] = {}
        self._apis: dict[tuple, str] = {}
        self._clients: dict[str | None, str] = {}

    def _route(self, client: tuple[str, int], broker: tuple[str, int]) -> str:
        routes = self._routes
        text = routes.get((client, broker))
        if text is None:
            text = self.palette.addr(f"{format_address(client)} {ARROW} {format_address(broker)}")
            if len(routes) >= CACHE_LIMIT:
                routes.clear()
            routes[(client, broker)] = text
        return text

    def _api(self, msg: KafkaMessage | None, protocol: str, exchange: Exchange) -> str:
        """The coloured ``"Produce v9"`` label of an exchange whose first message is ``msg``."""
        key = (protocol, msg.api_key, msg.api_version) if msg is not None else None
        apis = self._apis
        text = apis.get(key)
        if text is None:
            text = self.palette.api(describe_api(exchange))
            if len(apis) >= CACHE_LIMIT:
                apis.clear()
            apis[key] = text
        return text

    def _client(self, client_id: str | None) -> str:
        """The printable client id (``-`` when there is none); remembered per id."""
        clients = self._clients
        text = clients.get(client_id)
        if text is None:
            text = printable(client_id) if client_id else "-"
            if len(clients) >= CACHE_LIMIT:
                clients.clear()
            clients[client_id] = text
        return text

    def format(self, exchange: Exchange, facts: ExchangeFacts | None = None) -> str:
        p = self.palette
        if facts is None:
            facts = ExchangeFacts(exchange)
        req, resp = exchange.request, exchange.response
        first = req if req is not None else exchange._first()
        ts = first.ts_first         # (Exchange.ts: the first frame, as the index)
        if self.start_ts is None:
            self.start_ts = ts
        mode = self.time_format
        if mode == "r":
            when = f"{ts - self.start_ts:>10.6f}"
        else:
            when = f"{format_time(ts, mode, self.start_ts):>10}"
        protocol = exchange.protocol
        corr = first.correlation_id
        # one f-string for the fixed columns (the optional ones are appended)
        line = (f"{exchange.index:5d} {p.time(when) if p.enabled else when} "
                f"{self._route(exchange.client, exchange.broker)} "
                f"{self._client(req.client_id if req is not None else None)} "
                f"{self._api(first, protocol, exchange)} "
                f"#{'-' if corr is None else corr} "
                + format_latency((resp.ts_last - req.ts_last) * 1000.0
                                 if req is not None and resp is not None else None))
        errors = facts.response_side.errors       # facts.error_codes, when there are any
        if errors:
            codes = sorted(errors)
            names = ",".join([error_label(c, protocol) for c in codes[:2]])
            if len(codes) > 2:
                names += f",+{len(codes) - 2}"
            line += " " + p.error(names)
        text = facts.digest_text      # the summary lane computed it already
        if text is None:
            text = digest(exchange, facts)
        if text:
            line += " " + (text if text.isprintable() else printable(text))
        problems = len(exchange.problems)
        if req is not None:
            problems += len(req.problems)
        if resp is not None:
            problems += len(resp.problems)
        # batch header and CRC checks of the record sets (never record decoding):
        # the problems the export lists and -V shows under each batch
        problems += facts.record_problems
        if problems:
            line += " " + p.warn(f"[{problems} problem{'s' if problems != 1 else ''}]")
        return line
