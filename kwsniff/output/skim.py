"""The summary lane: summary lines of exchanges whose bodies the engine deferred, without
decoding those bodies into :class:`~kwsniff.kafka.records.Records` and walking them.

Contract:

* :class:`SummaryLane` (one per run, only where the field-decoder kernel
  ``kwsniff.kafka.protocol._fields`` is in use) gives, for an exchange
  of the ``kafka`` protocol whose request body (and response body, when it has a
  response) the engine deferred (``EngineOptions.defer_bodies``) and whose API has the
  built-in request and response digests, a :class:`SkimFacts`: the digest text, the
  response's error codes and no record-set problems, read from the kernel's ``skim_fields``
  (the C field decoder run over the same schema program, with every record set as its
  ``(batches, records, bytes)``), worded by the built-in digests of
  :mod:`kwsniff.output.digest` (the one source of that text). The summary line made
  from them is exactly the line
  the full decoding gives (``tests/output/test_skim.py`` compares them on every
  committed capture, on the benchmark captures when they are built, on encoded, damaged
  and mutated messages; the ``lane`` fuzz target does the same on fuzzed frames).
* It declines (returns None) wherever that could differ, after decoding the deferred
  bodies as the full path does (:func:`kwsniff.kafka.decoding.complete`): a body the C
  decoder declines (malformed, truncated, a problem to report), bytes left after a
  body, a record set that is not whole clean magic-2 batches with matching CRC-32Cs, a
  digest function that raises, a plugin digest, or plugin fields shown on the summary
  line.
  The caller then builds :class:`~kwsniff.output.facts.ExchangeFacts` as before.
* Only summary lines use it: without a display filter (a filter reads full facts), not
  for ``-V``/``-x``/export/stats, which show what the lane never decodes.
* The exchange itself is not changed when the lane answers: its messages keep their
  deferred bodies (nothing after the summary line reads them).
"""

from __future__ import annotations

from typing import Any

from kwsniff.kafka.decoding import DEFERRABLE_APIS, complete
from kwsniff.kafka.model import Exchange, KafkaMessage
from kwsniff.kafka.protocol.cprogram import skim_fields as _skim_fields
from kwsniff.output import digest as _digest
from kwsniff.output import extra_fields
from kwsniff.output.facts import topic_label as _topic_label

# the registries the lane checks on every exchange (the same dict objects: plugins and
# tests change their items, never rebind them)
_REQUESTS = _digest._REQUEST
_RESPONSES = _digest._RESPONSE
_EXTRA = extra_fields._extra


#: the built-in digests of the APIs the engine can defer (plugins may replace them:
#: the lane then declines those APIs)
_BUILTIN: dict[int, tuple[Any, Any]] = {
    key: (_digest._REQUEST[key], _digest._RESPONSE[key]) for key in sorted(DEFERRABLE_APIS)
    if key in _digest._REQUEST and key in _digest._RESPONSE}


class _Errors:
    """What the summary line reads of the response's facts: its non-zero error codes."""

    __slots__ = ("errors",)

    def __init__(self, codes: list[int]) -> None:
        self.errors: dict[int, None] = dict.fromkeys(codes)


_NO_ERRORS = _Errors([])


class SkimFacts:
    """The facts the summary line reads, as the lane computed them (see the contract):
    what :meth:`~kwsniff.output.summary.SummaryFormatter.format` and the selection read of
    an :class:`~kwsniff.output.facts.ExchangeFacts` (``digest_text``,
    ``response_side.errors``, ``record_problems``), and ``topic_label`` for the digests;
    nothing else of it (the lane's lines are made from these alone)."""

    __slots__ = ("exchange", "names", "digest_text", "response_side", "record_problems")

    def __init__(self, exchange: Exchange, names: Any, digest_text: str,
                 errors: list[int]) -> None:
        self.exchange = exchange
        self.names = names
        self.digest_text = digest_text
        self.response_side = _Errors(errors) if errors else _NO_ERRORS
        self.record_problems = 0            # clean magic-2 sets only

    def topic_label(self, struct: dict[str, Any]) -> str:
        """As ``ExchangeFacts.topic_label`` (:func:`kwsniff.output.facts.topic_label`)."""
        return _topic_label(struct, self.names)


class SummaryLane:
    """See the module contract. ``annotate_ctx``: the engine's annotate context (for the
    bodies completed when the lane declines); ``names``: the run's topic names."""

    __slots__ = ("annotate_ctx", "names", "tried", "taken")
    # tried: exchanges of the lane's APIs with a deferred request; taken: lines it made

    def __init__(self, annotate_ctx: Any, names: Any = None) -> None:
        self.annotate_ctx = annotate_ctx
        self.names = names
        self.tried = 0
        self.taken = 0

    @staticmethod
    def available() -> bool:
        """Whether this build has the lane (the field-decoder kernel's ``skim_fields``)."""
        return _skim_fields is not None

    def facts(self, ex: Exchange) -> SkimFacts | None:
        """The lane's facts of ``ex``, or None after completing its deferred bodies."""
        req = ex.request
        if req is not None and req.deferred is not None and req.api_key in _BUILTIN:
            self.tried += 1
            found = self._skim(ex, req)
            if found is not None:
                self.taken += 1
                return found
        complete(ex, self.annotate_ctx)
        return None

    def complete(self, ex: Exchange) -> None:
        """Decode the deferred bodies of ``ex`` as the full path does (no lane)."""
        complete(ex, self.annotate_ctx)

    def _skim(self, ex: Exchange, req: KafkaMessage) -> SkimFacts | None:
        resp = ex.response
        if _skim_fields is None or ex.protocol != "kafka":
            return None
        if _EXTRA and _plugin_digest_fields():
            return None     # (plugin fields on the summary line read the records)
        if resp is not None and resp.deferred is None:
            return None
        key = req.api_key
        builtin = _BUILTIN.get(key)         # type: ignore[arg-type]
        if builtin is None or _REQUESTS.get(key) is not builtin[0] \
                or _RESPONSES.get(key) is not builtin[1]:
            return None
        req_body = _body(req, None)
        if req_body is None:
            return None
        errors: list[int] = []
        resp_body = None
        if resp is not None:
            resp_body = _body(resp, errors)
            if resp_body is None:
                return None
        facts = SkimFacts(ex, self.names, "", errors)
        try:
            left = builtin[0](req_body, req.api_version, facts)
            right = builtin[1](resp_body, resp.api_version, facts, req_body) \
                if resp is not None else None
        except Exception:  # noqa: BLE001 - the full path then falls back as it does
            return None
        facts.digest_text = _digest.compose(ex, left, right)
        return facts


def _plugin_digest_fields() -> bool:
    """Whether a plugin field is shown on the summary line."""
    return any(f.digest for f in extra_fields._extra.values())


def _body(msg: KafkaMessage, errors: list[int] | None) -> dict[str, Any] | None:
    """The skimmed body of a deferred message, or None (see the contract)."""
    fn, _kind, _version, pos = msg.deferred     # type: ignore[misc]
    program = getattr(fn, "program", None)
    if program is None:
        return None
    raw = msg.raw
    found = _skim_fields(raw, pos, program, errors)    # type: ignore[misc]
    if found is None or found[1] != len(raw):
        return None
    return found[0]


__all__ = ["SkimFacts", "SummaryLane"]
