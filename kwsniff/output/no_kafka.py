"""The note for a capture in which no Kafka was found at all.

Contract: :func:`no_kafka_note` returns None when the run found a Kafka connection,
else one line saying so, with the server ports of the TCP connections seen (most
connections first) and the ``-p PORT`` option to try — the usual reason is Kafka on a
port kwsniff was not told about whose traffic its content detection could not
recognise (mid-stream captures, TLS, or ``--no-detect``). The ports come from
:func:`tcp_server_ports`, a second pass over at most :data:`MAX_PORT_SCAN_PACKETS`
packets of the capture with the TCP layer only (only ever on a capture that held no
Kafka; standard input cannot be read twice and gives no ports).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from itertools import islice

#: packets read to find the TCP ports of a capture without Kafka
MAX_PORT_SCAN_PACKETS = 1_000_000
#: ports named in the note
MAX_PORTS_SHOWN = 5


def tcp_server_ports(capture: str, max_packets: int = MAX_PORT_SCAN_PACKETS) -> Counter[int]:
    """TCP connections per server port in the first ``max_packets`` packets of the
    capture file ``capture`` (the accepting side when the handshake was captured,
    else the lower port of the two). Empty for standard input or an unreadable file."""
    from kwsniff.capture import open_capture
    from kwsniff.errors import UserError
    from kwsniff.tcp.events import ConnectionOpened
    from kwsniff.tcp.stream import iter_tcp_events

    ports: Counter[int] = Counter()
    if capture == "-":
        return ports
    try:
        with open_capture(capture) as source:
            for ev in iter_tcp_events(islice(source, max_packets)):
                if type(ev) is ConnectionOpened:
                    conn = ev.conn
                    server = conn.server
                    ports[server[1] if server is not None else min(conn.a[1], conn.b[1])] += 1
    except (OSError, UserError):
        return Counter()
    return ports


def no_kafka_note(kafka_connections: int, tcp_connections: int,
                  ports: Mapping[int, int]) -> str | None:
    """``"no Kafka found in 3 TCP connections (server ports 8080 x2, 5432); try -p 8080
    if Kafka runs on one of them"`` — or None when Kafka was found (module docstring)."""
    if kafka_connections:
        return None
    if not tcp_connections:
        return "no Kafka found: the capture holds no TCP connections"
    ranked = sorted(ports.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{port} x{n}" if n > 1 else str(port)
                      for port, n in ranked[:MAX_PORTS_SHOWN])
    if len(ranked) > MAX_PORTS_SHOWN:
        shown += f", ... ({len(ranked)} ports)"
    plural = "s" if tcp_connections != 1 else ""
    text = f"no Kafka found in {tcp_connections} TCP connection{plural}"
    if ranked:
        port_word = "port" if len(ranked) == 1 else "ports"
        text += f" (server {port_word} {shown}); try -p {ranked[0][0]}"
        text += " if Kafka runs on it" if len(ranked) == 1 else \
            " (or another of them) if Kafka runs there"
    else:
        text += "; try -p PORT with the broker's port"
    return text


def capture_note(capture: str, kafka_connections: int) -> str | None:
    """:func:`no_kafka_note` from the capture file alone (its TCP connections counted by
    :func:`tcp_server_ports`): for runs whose engine is not at hand (``-j N``)."""
    if kafka_connections:
        return None
    ports = tcp_server_ports(capture)
    return no_kafka_note(0, sum(ports.values()), ports)
