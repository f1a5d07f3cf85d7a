"""Summary lines: one line per exchange, in capture order (``kwsniff decode``).

Contract: :class:`SummaryFormatter.format` returns one line (no newline)::

    #   time      client → broker              client id  API vN   corr  latency  digest
    7   0.003215 10.0.0.1:51234 → 10.0.0.2:9092 rdkafka Produce v9 #7 3.20 ms orders[0..2] …

* time: relative to the first exchange (``-t r``, default), absolute local time (``a``),
  absolute with date (``ad``), UTC with date (``ud``) or epoch seconds (``e``);
* errors found in the response are shown by name after the latency, unless the digest
  names them already (``→ UNSUPPORTED_VERSION``): an error name shows once;
* with ``align`` (a terminal's width), the route, client id, API, correlation id and
  latency columns are padded to the widths seen in the first :data:`ALIGN_LEARN_LINES` lines (as
  tshark does), as long as the padded columns fit in that width;
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
from kwsniff.output.names import SASL_PROTOCOL, error_label

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
    """Milliseconds with two decimals whatever the size (one unit style per run:
    ``0.06 ms``, ``300.72 ms``, ``4995.07 ms``), ``-`` for None."""
    if ms is None:
        return "-"
    return "%.2f ms" % ms      # (printf-style: the same text, cheaper than format())


#: entries each of the formatter's caches of connection routes, client ids and API labels
#: holds before it is cleared (a capture has few of each, so it rarely is)
CACHE_LIMIT = 4096
#: lines whose column widths ``align`` learns (later lines use those widths)
ALIGN_LEARN_LINES = 64
#: ``align``: starting and largest widths of route, client id, API, correlation id and
#: latency (a longer value overflows its column instead of widening it for good)
ALIGN_MIN_WIDTHS = (0, 8, 14, 3, 8)
ALIGN_MAX_WIDTHS = (47, 24, 20, 7, 11)
_ANSI = re.compile("\x1b\\[[0-9;]*m")


class SummaryFormatter:
    """Formats summary lines; remembers the first timestamp for relative times, and the
    coloured route, client id and API label texts already made (the same few recur on
    every line)."""

    __slots__ = ("palette", "time_format", "start_ts", "_routes", "_apis", "_clients",
                 "align", "_widths", "_learning")

    def __init__(self, palette: Palette = PLAIN, time_format: str = "r",
                 start_ts: float | None = None, align: int | None = None) -> None:
        if time_format not in TIME_FORMATS:
            raise ValueError(f"time format must be one of {', '.join(TIME_FORMATS)}")
        self.palette = palette
        self.time_format = time_format
        self.start_ts = start_ts
        self._routes: dict[tuple, str] = {}
        self._apis: dict[tuple, str] = {}
        self._clients: dict[str | None, str] = {}
        self.align = align                  # terminal width, or None: no padding
        self._widths = list(ALIGN_MIN_WIDTHS)   # route, client id, API, corr, latency
        self._learning = ALIGN_LEARN_LINES

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

    def _aligned(self, route: str, client: str, api: str, corr: str, latency: str) -> str:
        """``route client api corr latency`` padded to the learned widths (``align``;
        the latency right-aligned)."""
        cols = (route, client, api, corr, latency)
        seen = [len(_ANSI.sub("", c)) if "\x1b" in c else len(c) for c in cols]
        widths = self._widths
        if self._learning > 0:
            self._learning -= 1
            for i in range(5):
                if widths[i] < seen[i] <= ALIGN_MAX_WIDTHS[i]:
                    widths[i] = seen[i]
        # 5 + 1 + 10 + 1: number and time; then the columns and the spaces between them
        if 17 + sum(widths) + 4 > (self.align or 0):
            return f"{route} {client} {api} {corr} {latency}"
        pad = [" " * max(0, w - n) for w, n in zip(widths, seen)]
        return f"{route}{pad[0]} {client}{pad[1]} {api}{pad[2]} {corr}{pad[3]} {pad[4]}{latency}"

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
            when = "%10.6f" % (ts - self.start_ts)     # (= f"{...:>10.6f}", cheaper)
        else:
            when = f"{format_time(ts, mode, self.start_ts):>10}"
        protocol = exchange.protocol
        index = exchange.index
        corr = first.correlation_id
        # (raw SASL tokens have no correlation id: "SASL (raw token)", not "SASL #-")
        tag = f"#{corr}" if corr is not None else \
            "(raw token)" if protocol == SASL_PROTOCOL else "#-"
        latency = format_latency((resp.ts_last - req.ts_last) * 1000.0
                                 if req is not None and resp is not None else None)
        if self.align is None:
            # one f-string for the fixed columns (the optional ones are appended)
            line = (f"{index:5d} {p.time(when) if p.enabled else when} "
                    f"{self._route(exchange.client, exchange.broker)} "
                    f"{self._client(req.client_id if req is not None else None)} "
                    f"{self._api(first, protocol, exchange)} {tag} " + latency)
        else:
            line = (f"{index:5d} {p.time(when) if p.enabled else when} "
                    + self._aligned(self._route(exchange.client, exchange.broker),
                                    self._client(req.client_id if req is not None else None),
                                    self._api(first, protocol, exchange),
                                    tag, latency))
        text = facts.digest_text      # the summary lane computed it already
        if text is None:
            text = digest(exchange, facts)
        errors = facts.response_side.errors       # facts.error_codes, when there are any
        if errors:
            codes = sorted(errors)
            labels = [error_label(c, protocol) for c in codes[:2]]
            names = ",".join(labels)
            if len(codes) > 2:
                names += f",+{len(codes) - 2}"
            answer = text.partition(ARROW)[2] if text else ""
            named = len(codes) <= 2
            for label in labels:        # (a loop: no closure in the compiled method)
                if label not in answer:
                    named = False
                    break
            if not named:
                line += " " + p.error(names)
                labels = []
        else:
            labels = []
        if text:
            text = text if text.isprintable() else printable(text)
            if labels and p.enabled:    # the errors named once, in the digest: coloured there
                asked, arrow, answer = text.partition(ARROW)
                for label in labels:
                    answer = answer.replace(label, p.error(label))
                text = asked + arrow + answer
            line += " " + text
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
