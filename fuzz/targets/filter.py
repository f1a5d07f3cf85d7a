"""The display-filter language: lexer, parser, compiler, completion, evaluation.

Input: the expression as UTF-8 (invalid bytes replaced). Invariants: compiling either
succeeds or raises :class:`~kwsniff.output.filter.FilterError` whose position lies
within the expression and whose message is one line (the rendered error adds the
expression and a caret under the position); completion never raises; a
compiled filter's predicate evaluates on real exchanges without raising.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from fuzz import checks
from fuzz import seeds as _seeds
from kwsniff.output.facts import ExchangeFacts, TopicNames
from kwsniff.output.fields import FIELDS
from kwsniff.output.filter import FilterError, check_filter, compile_filter, suggest

MAX_LEN = 512
EXAMPLES = (
    'api == "Produce" and topic == "orders" and latency_ms > 50', "error",
    "error == NOT_LEADER_OR_FOLLOWER or error == 3",
    "api in {JoinGroup SyncGroup Heartbeat} and group == billing",
    "client == 10.0.0.1 and not status == paired", "partition in {0..3} and records > 1000",
    'client_id matches "^rdkafka" and version < 9', "latency_ms >= 500",
    "!(topic contains 'ord') || broker == \"[::1]:9092\"", "api_key ne 0x12 && frame le 9",
    "status not in {paired, unanswered}", 'client_id ~ "\\d+"', "topic == \"a\\x41\\n\"",
)
DICTIONARY = tuple(FIELDS) + ("==", "!=", "<=", ">=", "eq", "ne", "lt", "gt", "and", "or",
                              "not", "in", "contains", "matches", "~", "{", "}", "..", "(",
                              ")", '"', "'", "\\x", "0x", ",", "&&", "||", "!")


def seeds() -> Iterable[bytes]:
    for e in EXAMPLES:
        yield e.encode()
    for name in FIELDS:
        yield name.encode()


@lru_cache(maxsize=1)
def _facts() -> tuple[ExchangeFacts, ...]:
    from kwsniff.capture import open_capture
    from kwsniff.engine import iter_exchanges
    out = []
    names = TopicNames()
    for path in _seeds.capture_paths()[:3]:
        with open_capture(str(path)) as src:
            for i, ex in enumerate(iter_exchanges(src)):
                if i >= 12:
                    break
                out.append(ExchangeFacts(ex, names))
    return tuple(out)


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for i in range(0, len(text) + 1, max(1, len(text) // 4)):
        suggest(text[:i])
    try:
        flt = compile_filter(text)
    except FilterError as err:
        checks.require(0 <= err.position <= len(text), f"error position {err.position} outside "
                                                       f"the {len(text)}-character expression")
        checks.require("\n" not in err.message, f"multi-line error message {err.message!r}")
        checks.require(str(err).startswith("bad display filter: " + err.message),
                       f"error text {str(err)!r} does not start with its message")
        checks.require(check_filter(text) is not None, "check_filter disagrees with compile")
        return
    checks.require(check_filter(text) is None, "check_filter disagrees with compile")
    if "matches" in text.lower() or "~" in text:
        return    # a user regular expression may legitimately be slow; not evaluated here
    for facts in _facts():
        flt._pred(facts)
