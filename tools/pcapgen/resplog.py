"""Client-side log of the responses librdkafka received (``debug=protocol``).

librdkafka writes ``Received XxxResponse (vN, SIZE bytes, CorrId N, rtt R ms)`` lines
to stderr when a response has been read; :func:`client_responses` reads them, with the
line's timestamp (the client's clock, truncated to milliseconds). The insights
scenarios compare kwsniff's Fetch response times with these.
"""

from __future__ import annotations

import re
from typing import Any

# "%7|1795253097.596|RECV|rk#consumer-1| [thrd:...]: host:port/1: Received FetchResponse
#  (v11, 1234 bytes, CorrId 7, rtt 1.23ms)"
_RDK_RECV = re.compile(
    r"^%\d+\|(?P<ts>\d+\.\d+)\|RECV\|(?P<rk>[^|#]+)#[^|]*\| \[thrd:[^\]]*\]: "
    r"\S*: Received (?P<api>\w+?)Response "
    r"\(v(?P<ver>\d+), (?P<size>\d+) bytes, CorrId (?P<corr>\d+)")


def client_responses(text: str) -> list[dict[str, Any]]:
    """The responses librdkafka logged receiving (``debug=protocol``), in log order."""
    out = []
    for line in text.splitlines():
        if "|RECV|" not in line or " Received " not in line:
            continue
        m = _RDK_RECV.match(line)
        if m:
            out.append({"client_id": m.group("rk"), "api": m.group("api"),
                        "api_version": int(m.group("ver")),
                        "correlation_id": int(m.group("corr")), "ts": float(m.group("ts"))})
    return out
