"""Which consumer group a connection's Fetch requests read for.

Group membership is learned from the group requests a client sends (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit and the
KIP-848 ConsumerGroupHeartbeat): the connection (TCP stream) that carried one, and the
client (client address + client id) that sent it. Consumers usually fetch on other
connections than the ones to their group coordinator, so a Fetch is attributed by its
connection first, then by its client; a client seen in more than one group is
ambiguous and its Fetches go to ``client <id>``, as do Fetches of clients never seen
in a group (``assign()`` consumers that commit nothing). Bounded: at most ``limit``
connections and clients are remembered (the oldest are forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 28, 68})

_AMBIGUOUS = object()


class Membership:
    __slots__ = ("limit", "_by_stream", "_by_client")

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._by_stream: OrderedDict[int, str] = OrderedDict()
        self._by_client: OrderedDict[tuple[str, str], Any] = OrderedDict()

    def _put(self, table: OrderedDict, key: Any, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        if len(table) > self.limit:
            table.popitem(last=False)

    def learn(self, exchange: Any, group: str) -> None:
        """Note that ``exchange`` (a group request) was sent for ``group``."""
        if not group:
            return
        self._put(self._by_stream, exchange.stream, group)
        client_id = exchange.client_id
        if client_id is not None:
            key = (exchange.client[0], client_id)
            known = self._by_client.get(key)
            if known is not None and known is not _AMBIGUOUS and known != group:
                group = _AMBIGUOUS
            if known is not _AMBIGUOUS:
                self._put(self._by_client, key, group)

    def known_group(self, exchange: Any) -> str | None:
        """The group id a Fetch exchange is attributed to, None when none is known (a
        client never seen in a group, or seen in several)."""
        group = self._by_stream.get(exchange.stream)
        if group is not None:
            return group
        client_id = exchange.client_id
        if client_id is not None:
            known = self._by_client.get((exchange.client[0], client_id))
            if isinstance(known, str):
                return known
        return None

    def group_of(self, exchange: Any) -> str:
        """The group label of a Fetch exchange: the group id, or ``client <id>``."""
        group = self.known_group(exchange)
        if group is not None:
            return group
        client_id = exchange.client_id
        return f"client {client_id if client_id is not None else '?'}"
