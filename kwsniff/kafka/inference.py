"""Best-effort decoding of orphan responses (their request was not captured).

Contract: :func:`infer_response` tries ``(api key, version)`` candidates in tiers, most
likely first:

1. ``connection`` - the pairs this connection's client used in requests we saw;
2. ``client`` - the pairs the same client (client id, else client address) used on
   its other connections;
3. ``apiversions`` - every version the broker advertised in an ApiVersions response
   on this connection (or, when none was seen, ``bytes`` - every known pair).

Within the first tier where at least one candidate decodes the frame *exactly* (no
problems, every byte consumed), the first such candidate wins and the message's
``inferred`` is set to ``"<tier>: <n> of <tried> candidates fit"``, followed by
``"; <k> other APIs fit too"`` when a narrow-tier choice is not the only API whose
layout matches the bytes (then it rests on the client's habits, not on the bytes).  In the broad tiers
(3.) candidates of *different* APIs fitting make the response ambiguous: it is then
left undecoded rather than labelled with a guess.  When nothing is chosen, None and
the reason are returned and the caller keeps the response undecoded.  Never raises.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from kwsniff.kafka import decoding
from kwsniff.kafka.model import KafkaMessage
from kwsniff.kafka.plausible import MAX_VERSIONS

#: APIs clients use most, tried first when nothing narrows the choice
_COMMON = (3, 0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 18, 19, 20, 22, 24, 25, 26, 28, 32, 36, 17)


class ApiHistory:
    """``(api_key, api_version)`` pairs seen in requests, most recent last; bounded."""

    __slots__ = ("pairs", "limit")

    def __init__(self, limit: int = 64) -> None:
        self.pairs: OrderedDict[tuple[int, int], int] = OrderedDict()
        self.limit = limit

    def note(self, api_key: int, api_version: int) -> None:
        k = (api_key, api_version)
        pairs = self.pairs
        if k in pairs:
            pairs[k] += 1
            pairs.move_to_end(k)
        else:
            pairs[k] = 1
            if len(pairs) > self.limit:
                pairs.popitem(last=False)

    def candidates(self) -> list[tuple[int, int]]:
        """Most used first, then most recent."""
        order = list(reversed(self.pairs.items()))
        order.sort(key=lambda kv: -kv[1])
        return [k for k, _ in order]

    def __len__(self) -> int:
        return len(self.pairs)


def all_pairs(broker_ranges: dict[int, tuple[int, int]] | None) -> list[tuple[int, int]]:
    """Every plausible pair (common APIs first, newest versions first), limited to the
    broker's advertised ranges when known."""
    keys = list(_COMMON) + [k for k in range(len(MAX_VERSIONS)) if k not in _COMMON]
    out = []
    for k in keys:
        hi = MAX_VERSIONS[k] if k < len(MAX_VERSIONS) else -1
        lo = 0
        if broker_ranges is not None:
            r = broker_ranges.get(k)
            if r is None:
                continue
            lo, hi = max(lo, r[0]), min(hi, r[1])
        for v in range(hi, lo - 1, -1):
            out.append((k, v))
    return out


#: tiers where the candidates come from the connection's own traffic: several fitting
#: APIs are resolved by preference; in broader tiers they make the orphan ambiguous
NARROW_TIERS = ("connection", "client")
#: decodes spent checking whether other APIs fit a narrow-tier choice (the common client
#: APIs, every version; each new (key, version) costs one decoder compilation)
OTHER_API_TRIES = 200


def infer_response(raw: bytes, tiers: Iterable[tuple[str, list[tuple[int, int]]]],
                   max_tries: int = 1200) -> tuple[KafkaMessage | None, str]:
    """Decode ``raw`` with the best fitting candidate; see the module contract.

    Returns ``(message, "")`` on success, else ``(None, why)``.
    """
    if len(raw) < 4:
        return None, "too short"
    tiers = list(tiers)
    tried: set[tuple[int, int]] = set()
    for tier, pairs in tiers:
        fits: list[KafkaMessage] = []
        n = 0
        for pair in pairs:
            if pair in tried:
                continue
            if len(tried) >= max_tries:
                break
            tried.add(pair)
            n += 1
            msg = decoding.fits_exactly(raw, pair[0], pair[1])
            if msg is not None:
                fits.append(msg)
        if not fits:
            continue
        keys = sorted({m.api_key for m in fits if m.api_key is not None})
        if tier not in NARROW_TIERS and len(keys) > 1:
            names = ", ".join(_name(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
            return None, (f"ambiguous: {len(fits)} of {n} candidates fit "
                          f"({len(keys)} APIs: {names})")
        best = fits[0]
        best.inferred = f"{tier}: {len(fits)} of {n} candidates fit"
        if tier in NARROW_TIERS and tiers[-1][0] not in NARROW_TIERS:
            others = _other_apis(raw, tiers[-1][1], best.api_key, OTHER_API_TRIES)
            if others:
                best.inferred += f"; {others} other APIs fit too"
        return best, ""
    return None, f"no candidate decodes it exactly ({len(tried)} tried)"


def _other_apis(raw: bytes, pairs: list[tuple[int, int]], api_key: int | None,
                budget: int) -> int:
    """How many APIs other than ``api_key`` decode ``raw`` exactly (bounded effort)."""
    keys: set[int] = set()
    for k, v in pairs:
        if budget <= 0:
            break
        if k == api_key or k in keys:
            continue
        budget -= 1
        if decoding.fits_exactly(raw, k, v) is not None:
            keys.add(k)
    return len(keys)


def _name(api_key: int) -> str:
    try:
        from kwsniff.kafka.protocol import api_name
        return str(api_name(api_key))
    except Exception:  # noqa: BLE001
        return str(api_key)
