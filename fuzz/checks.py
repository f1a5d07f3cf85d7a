"""Invariants the fuzz targets and the robustness tests check on kwsniff's results.

Contract: every ``check_*`` function raises :class:`Violation` (an AssertionError)
naming the broken invariant, or returns normally. They look only at public results
(events, messages, exchanges, summaries, rendered text).

Several layers keep a last-resort ``except Exception`` so that a bug never stops a
run; it turns the bug into a problem text. :func:`internal_error` recognises those
texts, so the fuzzers still see such bugs as findings.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from kwsniff.kafka.model import STATUSES, Exchange, KafkaMessage
from kwsniff.kafka.records import Records
from kwsniff.tcp import ConnectionClosed, ConnectionOpened, StreamData, StreamGap, TcpEventStream


class Violation(AssertionError):
    """An invariant of kwsniff does not hold."""


def require(cond: object, what: str) -> None:
    if not cond:
        raise Violation(what)


#: texts of problems that last-resort guards produce when code (not data) failed
_INTERNAL = re.compile(
    r"internal (decoder |SASL decoder )?error|batch scan failed|record decoding failed|"
    r"embedded decoding failed|could not be shown|decoder failed:|"
    r"\b(TypeError|AttributeError|KeyError|UnboundLocalError|NameError|ZeroDivisionError|"
    r"RecursionError|AssertionError|MemoryError|UnicodeEncodeError)\b")


def internal_error(problem: str) -> bool:
    """Whether a problem text is a caught programming error rather than bad data."""
    return bool(_INTERNAL.search(problem))


def check_problems(problems: Iterable[Any], where: str) -> None:
    """Problems are non-empty strings, none of them a caught programming error."""
    for p in problems:
        require(isinstance(p, str) and p.strip(), f"{where}: problem is not a text: {p!r}")
        require(not internal_error(p), f"{where}: internal error reported as a problem: {p}")


#: how a run-level problem names where it happened
FRAME_REF = re.compile(r"\bframes? \d+")


def check_located(problems: Iterable[str], where: str) -> None:
    """Run-level problems (capture, TCP, framing, detection) name their frame."""
    for p in problems:
        require(FRAME_REF.search(p), f"{where}: problem without a frame number: {p!r}")


# ----------------------------------------------------------------------------- TCP

def check_tcp_events(events: Sequence[Any], frames: int) -> None:
    """The stream-event contract of :mod:`kwsniff.tcp.events`."""
    state: dict[int, str] = {}                 # conn index -> "open" | "closed"
    nxt: dict[tuple[int, int], int] = {}
    for ev in events:
        t = type(ev)
        idx = ev.conn.index
        if t is ConnectionOpened:
            # (bytes after a RST/FIN reopen the same connection: a second
            # ConnectionOpened after its ConnectionClosed, its offsets going on)
            require(state.get(idx) != "open", f"connection {idx} opened twice while open")
            require(idx not in state or getattr(ev.conn, "reopened", False),
                    f"connection {idx} opened again without being marked reopened")
            state[idx] = "open"
            continue
        require(state.get(idx) == "open", f"{t.__name__} for connection {idx} in state "
                                          f"{state.get(idx)}")
        if t is ConnectionClosed:
            state[idx] = "closed"
            continue
        key = (idx, ev.direction)
        require(ev.direction in (0, 1), f"direction {ev.direction}")
        require(1 <= ev.frame <= frames, f"frame {ev.frame} outside 1..{frames}")
        expected = nxt.get(key, 0)
        require(ev.offset == expected, f"connection {idx} dir {ev.direction}: event at offset "
                                       f"{ev.offset}, expected {expected}")
        if t is StreamData:
            require(len(ev.data) > 0, "empty StreamData")
            nxt[key] = ev.offset + len(ev.data)
        else:
            require(t is StreamGap, f"unknown event {ev!r}")
            require(ev.length > 0, "empty StreamGap")
            require(isinstance(ev.reason, str) and ev.reason, "gap without a reason")
            nxt[key] = ev.offset + ev.length
    require(all(s == "closed" for s in state.values()), "a connection was never closed")


# ----------------------------------------------------------------------------- Kafka

def check_message(msg: KafkaMessage, where: str = "message") -> None:
    require(msg.kind in ("request", "response"), f"{where}: kind {msg.kind!r}")
    require(0 <= msg.body_offset <= len(msg.raw) or msg.body is None,
            f"{where}: body_offset {msg.body_offset} outside the frame")
    require(0 <= msg.body_end <= len(msg.raw), f"{where}: body_end {msg.body_end} outside "
                                                f"the {len(msg.raw)}-byte frame")
    require(msg.missing >= 0, f"{where}: negative missing")
    check_problems(msg.problems, where)


def check_exchanges(exchanges: Sequence[Exchange]) -> None:
    """Indices 1..n in order; each exchange well formed; no internal errors reported."""
    for i, ex in enumerate(exchanges, 1):
        where = f"exchange {ex.index}"
        require(ex.index == i, f"exchange index {ex.index}, expected {i}")
        require(ex.status in STATUSES, f"{where}: status {ex.status!r}")
        require(ex.request is not None or ex.response is not None, f"{where}: empty")
        for msg in (ex.request, ex.response):
            if msg is not None:
                check_message(msg, f"{where} {msg.kind}")
                # (frame_first > frame_last is possible: with reordering, the segment that
                # carries a message's first byte can be captured after its last one)
                require(msg.frame_first >= 0 and msg.frame_last >= 0, f"{where}: frame < 0")
        check_problems(ex.problems, where)


def check_byte_accounting(exchanges: Sequence[Exchange], summaries: Iterable[Any],
                          delivered: dict[int, int]) -> None:
    """Per Kafka connection, every delivered stream byte is in a message or counted as
    skipped: ``sum(frame bytes) + skipped <= delivered <= sum(frame bytes + missing) +
    skipped`` (bytes after a hole inside a frame are part of that frame)."""
    framed: dict[int, int] = {}
    missing: dict[int, int] = {}
    for ex in exchanges:
        for msg in (ex.request, ex.response):
            if msg is not None:
                framed[ex.stream] = framed.get(ex.stream, 0) + len(msg.raw) + 4
                missing[ex.stream] = missing.get(ex.stream, 0) + msg.missing
    for cs in summaries:
        if cs.protocol not in ("kafka", "kafka-0.7"):
            continue
        got = delivered.get(cs.stream, 0)
        lo = framed.get(cs.stream, 0) + cs.skipped_bytes
        hi = lo + missing.get(cs.stream, 0)
        require(lo <= got <= hi, f"stream {cs.stream}: {got} bytes delivered, "
                                 f"{framed.get(cs.stream, 0)} in messages (+"
                                 f"{missing.get(cs.stream, 0)} missing), "
                                 f"{cs.skipped_bytes} skipped")


# ----------------------------------------------------------------------------- output

#: characters that must never reach a terminal from wire data (line breaks, escapes)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_line(text: str, where: str) -> None:
    """One line of terminal output: no control characters (wire data is escaped)."""
    m = _CONTROL.search(text)
    require(m is None, f"{where}: control character {m.group()!r} in output line {text!r}"
            if m else "")


def render_all(exchanges: Sequence[Exchange], *, spans: bool = True, records: bool = True
               ) -> int:
    """Run every output view over ``exchanges`` (summary line, digest, -V tree with byte
    ranges, hex dump, JSON Lines export with records, statistics); returns the characters
    produced. Checks that export lines are valid JSON, that terminal lines hold no
    control characters and that no view hid an internal error."""
    from kwsniff.output.facts import ExchangeFacts, TopicNames
    from kwsniff.output.hexdump import frame_bytes, hexdump_lines
    from kwsniff.output.jsonl import ExportEncoder
    from kwsniff.output.stats import StatsCollector, render_report
    from kwsniff.output.summary import SummaryFormatter
    from kwsniff.output.tree import build_tree, plain_text, render_tree

    names = TopicNames()
    fmt = SummaryFormatter()
    enc = ExportEncoder("fuzz", records=records, names=names)
    stats = StatsCollector()
    total = 0
    for ex in exchanges:
        facts = ExchangeFacts(ex, names)
        line = fmt.format(ex, facts)
        check_line(line, f"exchange {ex.index} summary")
        total += len(line)
        if ex.index == 1:                   # absolute and epoch times of odd timestamps
            for mode in ("a", "ad", "ud", "e"):
                check_line(SummaryFormatter(time_format=mode).format(ex, facts),
                           f"exchange {ex.index} summary -t {mode}")
        root = build_tree(ex, spans=spans)
        lines = 0
        for text in render_tree(root, offsets=spans):
            check_line(text, f"exchange {ex.index} tree")
            total += len(text)
            lines += 1
        _check_tree(root, ex)
        # the plain -V text (a lean tree, its leaves made as lines): as many lines (no
        # wire text breaks one), no control characters (built after the full tree, which
        # decoded the record batches: their descriptions may read differently)
        plain = plain_text(build_tree(ex, lean=True))
        if plain is not None:
            plain_lines = (plain[0] + plain[1]).split("\n")
            require(len(plain_lines) == lines, f"exchange {ex.index}: the plain tree has "
                    f"{len(plain_lines)} lines, the tree {lines}")
            for text in plain_lines:
                check_line(text, f"exchange {ex.index} plain tree")
                total += len(text)
        for msg in (ex.request, ex.response):
            if msg is not None:
                for text in hexdump_lines(frame_bytes(msg.raw, msg.size), limit=4096):
                    total += len(text)
        for text in enc.lines(ex, facts):
            obj = json.loads(text)
            require(isinstance(obj, dict) and obj.get("kind") in ("exchange", "record"),
                    f"exchange {ex.index}: bad export object")
            if obj["kind"] == "exchange":
                check_problems(obj.get("problems") or (), f"exchange {ex.index} export")
            total += len(text)
        stats.add(facts)
    for text in render_report(stats.report()):
        check_line(text, "statistics")
        total += len(text)
    return total


def _check_tree(root: Any, ex: Exchange) -> None:
    """No hidden internal errors; byte ranges inside their frame."""
    sizes = {m.kind: m.size for m in (ex.request, ex.response) if m is not None}
    for _depth, node in root.walk():
        if node.label == "Problem":
            require(not internal_error(node.value), f"exchange {ex.index} tree: {node.value}")
        if node.start is not None and node.length is not None:
            size = sizes.get(node.message or "", 0)
            require(0 <= node.start and node.length >= 0 and node.start + node.length <= size,
                    f"exchange {ex.index} tree: {node.label} spans [{node.start}, "
                    f"{node.start + node.length}) outside its {size}-byte {node.message} frame")


# ------------------------------------------------------------------ field-decoder kernel

def exact(obj: Any) -> Any:
    """A comparable form of a decoded value that keeps types and dict key order
    (floats by their bits: NaN payloads and -0.0 too; record sets by their bytes)."""
    if isinstance(obj, dict):
        return ("dict", [(k, exact(v)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [exact(v) for v in obj])
    if isinstance(obj, Records):
        return ("Records", bytes(obj.data))
    if isinstance(obj, float):
        return ("float", struct.pack(">d", obj))
    return (type(obj).__name__, obj)


def decoding_outcome(fn: Any, buf: Any, pos: int) -> tuple:
    """What ``fn(buf, pos, out, problems, None)`` did: ("ok", end, dict, problems) or
    ("raised", exception type, text, partial dict, problems)."""
    out: dict = {}
    problems: list = []
    try:
        end = fn(buf, pos, out, problems, None)
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return ("raised", type(exc).__name__, str(exc), exact(out), problems)
    return ("ok", end, exact(out), problems)


def check_same_decoding(fn: Any, buf: Any, pos: int, where: str) -> bool:
    """A decoder run by the field-decoder kernel first (``fn.python`` behind it) gives what
    the generated Python alone gives: same dict (keys, order, types, values), end
    offset, problems, exception. Where C accepts the bytes, Python reports nothing.
    Returns whether C accepted."""
    got, want = decoding_outcome(fn, buf, pos), decoding_outcome(fn.python, buf, pos)
    require(got == want, f"{where}: C-first decoding {got!r} differs from the Python "
                         f"decoder's {want!r}")
    from kwsniff.kafka.protocol.cprogram import decode_fields
    accepted = decode_fields(buf, pos, {}, fn.program) is not None
    require(not accepted or (want[0] == "ok" and not want[3]),
            f"{where}: the C decoder accepted bytes the Python decoder reports: {want!r}")
    return accepted


def _records_tags(obj: Any, out: list) -> list:
    if isinstance(obj, dict):
        for v in obj.values():
            _records_tags(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _records_tags(v, out)
    elif isinstance(obj, Records):
        out.append((obj.topic, obj.partition))
    return out


def message_state(msg: KafkaMessage | None) -> Any:
    """Everything decoded of a message, comparable (body by :func:`exact`, the record
    sets' topic/partition tags, problems in order)."""
    if msg is None:
        return None
    return (msg.kind, msg.api_key, msg.api_version, msg.correlation_id, msg.client_id,
            exact(msg.header), msg.header_version, exact(msg.body), msg.body_offset,
            msg.body_end, list(msg.problems), msg.inferred, msg.frame_first, msg.frame_last,
            msg.ts_first, msg.ts_last, msg.stream_offset, msg.missing, msg.raw,
            msg.deferred is None, _records_tags(msg.body, []))


def exchange_state(ex: Exchange) -> Any:
    """An exchange and its messages, comparable."""
    return (ex.index, ex.stream, ex.client, ex.broker, ex.status, ex.protocol,
            list(ex.problems), message_state(ex.request), message_state(ex.response))


def engine_view(ex: Exchange) -> tuple:
    """What the engine decides about an exchange, whether or not its bodies are decoded."""
    return (ex.index, ex.stream, ex.status, ex.protocol, ex.api_key, ex.api_version,
            ex.correlation_id, len(ex.problems))


def check_deferred_same(eager: Sequence[Exchange], deferred: Sequence[Exchange],
                        completed: Any) -> None:
    """``deferred`` (an engine run with ``defer_bodies``, the exchanges for which
    ``completed(ex)`` holds passed to :func:`kwsniff.kafka.decoding.complete`) is
    ``eager``: the same engine decisions for all, the same state for the completed."""
    require([engine_view(e) for e in deferred] == [engine_view(e) for e in eager],
            "deferring bodies changed the engine's exchanges")
    for d, e in zip(deferred, eager):
        if completed(d):
            require(exchange_state(d) == exchange_state(e),
                    f"exchange {e.index}: completed deferred bodies differ from eager "
                    f"decoding: {exchange_state(d)!r} != {exchange_state(e)!r}")


def check_spill_same(exchanges: Sequence[Exchange]) -> None:
    """Every exchange read back from its TUI spill record (:func:`kwsniff.tui.spill.pack`
    then :func:`~kwsniff.tui.spill.rebuild`, what the TUI's detail pane and the row
    builder of ``tui -j 2`` see) is the exchange decoded."""
    from kwsniff.tui.spill import pack, rebuild

    for ex in exchanges:
        record, _raw = pack(ex)
        require(bool(record), f"exchange {ex.index}: cannot be spilled")
        again = rebuild(record)
        require(again is not None and exchange_state(again) == exchange_state(ex),
                f"exchange {ex.index}: the spilled exchange differs from the decoded one: "
                f"{exchange_state(again) if again is not None else None!r} != "
                f"{exchange_state(ex)!r}")


def feed_engine(engine: Any, packets: Iterable[tuple]) -> tuple[list[Exchange], dict[int, int],
                                                            dict[int, int], Any]:
    """Decode ``packets`` with ``engine`` event by event (its sans-IO entry) through a
    ``TcpEventStream``. Returns ``(exchanges, bytes of StreamData events, bytes the
    connections' sinks took, the stream)``, the byte counts per connection index, for
    the byte accounting (events of ignored connections are not counted)."""
    events: dict[int, int] = {}
    taken: dict[int, int] = {}
    out: list[Exchange] = []
    stream = TcpEventStream(packets, engine.options.tcp)
    for ev in stream:
        if type(ev) is StreamData and not ev.conn.ignored:
            events[ev.conn.index] = events.get(ev.conn.index, 0) + len(ev.data)
        out.extend(engine.feed_event(ev))
        if type(ev) is ConnectionOpened:
            _tap_sink(ev.conn, taken)
    out.extend(engine.finish())
    return out, events, taken, stream


def delivered_bytes(events: dict[int, int], taken: dict[int, int]) -> dict[int, int]:
    """Stream bytes delivered per connection: by events and through the sink."""
    return {k: events.get(k, 0) + taken.get(k, 0) for k in set(events) | set(taken)}


def _tap_sink(conn: Any, taken: dict[int, int]) -> None:
    """Count in ``taken`` the bytes the engine takes through ``conn.sink`` (no
    ``StreamData`` event carries them), once the engine has set it."""
    sink = conn.sink
    if sink is None:
        return

    def counted(d: int, offset: int, data: Any, frame: int, ts: float) -> bool:
        if sink(d, offset, data, frame, ts):
            taken[conn.index] = taken.get(conn.index, 0) + len(data)
            return True
        return False

    conn.sink = counted


def damaged_copy(packets: Sequence[tuple], rnd: Any) -> list[tuple]:
    """``packets`` as a lossy capture would have them (``rnd``: a ``random.Random``):
    about 5 % lost, 3 % duplicated and 3 % swapped with the packet before."""
    out: list[tuple] = []
    for p in packets:
        r = rnd.random()
        if r < 0.05:
            continue                                # lost
        out.append(p)
        if r < 0.08:
            out.append(p)                           # duplicated
        elif r < 0.11 and len(out) > 2:
            out[-1], out[-2] = out[-2], out[-1]     # reordered
    return out


def lane_lines(req_raw: bytes, resp_raw: bytes | None, status: str) -> tuple[str, str, bool]:
    """``(line of the full decoding, line through the summary lane, lane took it)`` of
    one exchange made of a request frame and, unless None, the response frame that
    answers it (both without the size prefix; the response decoded as the request's API
    and version). See :mod:`kwsniff.output.skim`."""
    import io

    from kwsniff.kafka import decoding, embedded
    from kwsniff.output.color import palette_for
    from kwsniff.output.facts import ExchangeFacts, TopicNames
    from kwsniff.output.skim import SummaryLane
    from kwsniff.output.summary import SummaryFormatter

    def pair(defer: bool) -> Exchange:
        req = decoding.decode_request(req_raw, defer=defer)
        req.frame_first = req.frame_last = 1
        req.ts_first = req.ts_last = 1_700_000_000.0
        resp = None
        if resp_raw is not None and req.api_key is not None and req.api_version is not None:
            resp = decoding.decode_response(resp_raw, req.api_key, req.api_version, defer=defer)
            resp.frame_first = resp.frame_last = 2
            resp.ts_first = resp.ts_last = 1_700_000_000.002
        ex = Exchange(index=1, stream=0, client=("10.0.0.1", 50000),
                      broker=("10.0.0.2", 9092), status=status, request=req, response=resp)
        # bodies decoded at once are annotated at once (as the conversation layer does);
        # deferred ones when they are completed
        ctx = embedded.AnnotateContext()
        if req.deferred is None:
            decoding.annotate(req, None, ctx, 0)
        if resp is not None and resp.deferred is None:
            decoding.annotate(resp, req, ctx, 0)
        return ex

    def formatter() -> SummaryFormatter:
        f = SummaryFormatter(palette_for(io.StringIO(), "never"), "r")
        f.start_ts = 1_700_000_000.0
        return f

    full = pair(False)
    full_line = formatter().format(full, ExchangeFacts(full, TopicNames()))
    lazy = pair(True)
    facts = SummaryLane(embedded.AnnotateContext(), TopicNames()).facts(lazy)
    taken = facts is not None
    lane_line = formatter().format(lazy, facts if facts is not None
                                   else ExchangeFacts(lazy, TopicNames()))
    return full_line, lane_line, taken


def check_lane(req_raw: bytes, resp_raw: bytes | None, status: str) -> bool:
    """The summary lane gives the full decoding's line (or declines); whether it took
    the exchange."""
    full, lane, taken = lane_lines(req_raw, resp_raw, status)
    require(lane == full, f"summary lane line differs:\n  full: {full!r}\n  lane: {lane!r}")
    check_line(lane, "summary lane line")
    return taken
