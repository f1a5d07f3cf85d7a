"""Client-side logs of every Kafka request the clients sent.

Each entry is ``{client_id, broker_port, local_port, api_key, api_name, api_version,
correlation_id, size, ts, source}``, taken from the client libraries' own debug
logging, never from the capture:

* librdkafka (confluent-kafka) with ``debug=protocol`` writes ``Sent XxxRequest (vN,
  SIZE bytes @ 0, CorrId N)`` lines to stderr (the scenario child process sends its
  stderr to a file); :func:`parse_librdkafka_log` reads them.
* kafka-python logs ``<conn> Request N: <request>`` at DEBUG on
  ``kafka.net.connection``; aiokafka logs ``Request to host:port N: <request>`` on
  ``aiokafka.conn``. :class:`PythonClientRequestLog` attaches logging handlers that
  read the request objects from the log records' arguments.
"""

from __future__ import annotations

import contextvars
import logging
import re
from typing import Any, Callable

from .apinames import API_NAMES, api_key_for_name

# "%7|1795253097.596|SEND|name#producer-1| [thrd:...]: BROKER/NODE: Sent XRequest (v3, ..."
# (BROKER is "host:port" or a logical name; "sasl_plaintext://host:port" for SASL clients)
_RDK_SEND = re.compile(
    r"^%\d+\|(?P<ts>\d+\.\d+)\|SEND\|(?P<rk>[^|]+)\| \[thrd:[^\]]*\]: "
    r"(?:\w+://)?(?P<broker>[^/\s]+?)(?:/(?P<node>[^:\s]+))?: Sent (?P<api>\w+?)Request "
    r"\(v(?P<ver>\d+), (?P<size>\d+) bytes @ (?P<at>\d+), CorrId (?P<corr>\d+)\)")


def _handle_node(text: str, line_start: int, line_end: int, handle: str,
                 broker: str) -> str | None:
    """The node id the lines of ``handle`` nearest to one line give the logical broker
    ``broker``: the last one before the line, else the first one after it."""
    pattern = re.compile(r"\|" + re.escape(handle) + r"\| \[thrd:[^\]]*\]: "
                         + re.escape(broker) + r"/(\d+): ")
    before = None
    for m in pattern.finditer(text, 0, line_start):
        before = m
    if before is not None:
        return before.group(1)
    after = pattern.search(text, line_end)
    return after.group(1) if after else None


class RequestLogError(RuntimeError):
    """A client log line could not be attributed."""


def parse_librdkafka_log(text: str, node_ports: dict[str, int]) -> list[dict[str, Any]]:
    """Requests from librdkafka ``debug=protocol`` stderr lines.

    ``node_ports`` maps broker node ids (as strings) to ports, for the logical
    coordinator handles (``GroupCoordinator/2``) whose names carry no address. The
    client id is the librdkafka handle name up to ``#`` (set ``client.id``). Each entry
    also carries ``_log_offset``, the byte offset of its line (for attributing requests
    to operations; private keys are stripped before the manifest is written).
    """
    out: list[dict[str, Any]] = []
    offset = 0
    char_offset = 0
    for line in text.splitlines(keepends=True):
        line_offset = offset
        offset += len(line.encode("utf-8", errors="replace"))
        line_chars = (char_offset, char_offset + len(line))
        char_offset += len(line)
        line = line.rstrip("\n")
        if "|SEND|" not in line or " Sent " not in line or " Sent partial " in line:
            continue  # "Sent partial" lines precede the final "Sent" of a large request
        m = _RDK_SEND.match(line)
        if not m:
            raise RequestLogError(f"unparsed librdkafka SEND line: {line}")
        api = m.group("api")
        if api.endswith("Request"):  # librdkafka names one API "IncrementalAlterConfigsRequest"
            api = api[: -len("Request")]
        key = api_key_for_name(api)
        if key is None:
            raise RequestLogError(f"unknown librdkafka API name {api!r}: {line}")
        broker = m.group("broker")
        node = m.group("node")
        if node is None:
            # A logical broker handle ("GroupCoordinator") logged without its node
            # (before it is known, or while reconnecting): the handle's other lines
            # name it ("GroupCoordinator/1: Received ...").
            node = _handle_node(text, *line_chars, m.group("rk"), broker)
        if re.fullmatch(r"[\w.\-]+:\d+", broker):
            port = int(broker.rsplit(":", 1)[1])
        elif node in node_ports:
            port = node_ports[node]
        else:
            raise RequestLogError(f"cannot tell the broker port of {broker}/{node}: {line}")
        out.append({
            "client_id": m.group("rk").split("#", 1)[0],
            "broker_port": port, "local_port": None, "api_key": key,
            "api_name": API_NAMES[key], "api_version": int(m.group("ver")),
            "correlation_id": int(m.group("corr")), "size": int(m.group("size")),
            "ts": float(m.group("ts")), "source": "librdkafka-debug-log",
            "_log_offset": line_offset})
    return out


_AIO_CONN: contextvars.ContextVar[Any] = contextvars.ContextVar("kwsniff_aio_conn",
                                                                default=None)


class _Handler(logging.Handler):
    def __init__(self, sink: Callable[[logging.LogRecord], None]) -> None:
        super().__init__(logging.DEBUG)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self._sink(record)


class PythonClientRequestLog:
    """Collects the requests kafka-python and aiokafka log while it is installed."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._installed: list[tuple[logging.Logger, logging.Handler, int]] = []
        self._aio_orig_send: Any = None

    def install(self) -> "PythonClientRequestLog":
        self._attach("kafka.net.connection", self._on_kafka_python)
        try:
            import aiokafka.conn as aioconn
        except ImportError:
            return self
        self._attach("aiokafka.conn", self._on_aiokafka)
        orig = aioconn.AIOKafkaConnection.send
        self._aio_orig_send = orig

        def send(conn: Any, request: Any, expect_response: bool = True) -> Any:
            token = _AIO_CONN.set(conn)
            try:
                return orig(conn, request, expect_response)
            finally:
                _AIO_CONN.reset(token)

        aioconn.AIOKafkaConnection.send = send  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        for logger, handler, level in self._installed:
            logger.removeHandler(handler)
            logger.setLevel(level)
        self._installed.clear()
        if self._aio_orig_send is not None:
            import aiokafka.conn as aioconn

            aioconn.AIOKafkaConnection.send = self._aio_orig_send  # type: ignore[method-assign]
            self._aio_orig_send = None

    def _attach(self, name: str, sink: Callable[[logging.LogRecord], None]) -> None:
        logger = logging.getLogger(name)
        handler = _Handler(sink)
        self._installed.append((logger, handler, logger.level))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)

    def _add(self, *, client_id: str, broker_port: int, local_port: int | None,
             request: Any, correlation_id: int, ts: float, source: str) -> None:
        key = int(request.API_KEY)
        self.requests.append({
            "client_id": client_id, "broker_port": broker_port, "local_port": local_port,
            "api_key": key, "api_name": API_NAMES.get(key, f"api-{key}"),
            "api_version": int(request.API_VERSION), "correlation_id": int(correlation_id),
            "size": None, "ts": ts, "source": source, "_seq": len(self.requests)})

    def _on_kafka_python(self, record: logging.LogRecord) -> None:
        if record.msg != "%s Request %d: %s":
            return
        conn, corr, request = record.args  # type: ignore[misc]
        if not hasattr(request, "API_KEY"):
            return      # SaslBytesRequest: a bare SASL token (after a v0 handshake)
        try:
            transport = conn.transport
            local = transport.getHost()
            peer = transport.getPeer()
            self._add(client_id=conn.parser._client_id, broker_port=int(peer[1]),
                      local_port=int(local[1]), request=request, correlation_id=corr,
                      ts=record.created, source="kafka-python-debug-log")
        except Exception as exc:  # recorded and reported by the scenario
            self.errors.append(f"kafka-python request log: {exc!r}")

    def _on_aiokafka(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith("Request to %s:%d %d:"):
            return
        host, port, corr, request = record.args  # type: ignore[misc]
        conn = _AIO_CONN.get()
        try:
            sockname = conn._writer.get_extra_info("sockname") if conn is not None else None
            self._add(client_id=conn._client_id if conn is not None else "?",
                      broker_port=int(port),
                      local_port=int(sockname[1]) if sockname else None,
                      request=request, correlation_id=corr, ts=record.created,
                      source="aiokafka-debug-log")
        except Exception as exc:
            self.errors.append(f"aiokafka request log: {exc!r}")
