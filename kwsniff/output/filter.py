"""The display-filter language (``-Y``): lexer, parser and evaluator over exchanges.

Contract:

* :func:`compile_filter` turns an expression into a :class:`DisplayFilter`, whose
  ``matches(facts)`` takes an :class:`~kwsniff.output.facts.ExchangeFacts` and returns a
  bool; it never raises at match time. Any mistake in the expression raises
  :class:`FilterError` (a :class:`~kwsniff.errors.UserError`) at compile time, with
  ``position`` (0-based character index), the expression and a caret line.
* Grammar (keywords are case-insensitive)::

      expr       := and_expr (("or" | "||") and_expr)*
      and_expr   := not_expr (("and" | "&&") not_expr)*
      not_expr   := ("not" | "!") not_expr | "(" expr ")" | test
      test       := FIELD                                  presence: has a value
                  | FIELD op value                          op: == != < <= > >= (eq ne lt le gt ge)
                  | FIELD ("contains" | "matches" | "~") value
                  | FIELD ["not"] "in" "{" item ([","] item)* "}"
      item       := value | NUMBER ".." NUMBER
      value      := "string" | 'string' | NUMBER | bare-word

* Multi-valued fields (topic, partition, error, ...) satisfy a test when *any* value
  does; ``!=`` is the negation of ``==`` ("no value equals"). A test on an absent value
  is false (so ``!=`` on it is true).
* Run-state fields (:func:`kwsniff.output.fields.run_state_fields`: end-to-end latency,
  consumer group) read the values a whole-run pass gives each exchange: the compiled
  filter lists the ones it names in ``run_fields`` (empty: a filter of one exchange's
  facts) and holds their values in ``annotations`` (:class:`RunAnnotations`), which
  :class:`~kwsniff.output.pipeline.Selection` fills by running
  :func:`kwsniff.output.insights.annotate.annotate_run` over the exchanges — only when
  ``run_fields`` is not empty.
* :func:`suggest` offers completions for the TUI (field names, operators, known values).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kwsniff.errors import UserError
from kwsniff.output.facts import ExchangeFacts
from kwsniff.output.fields import (
    FIELDS,
    WIRESHARK_ALIASES,
    WIRESHARK_HINTS,
    FieldSpec,
    canonical_field,
)
from kwsniff.output.names import error_code_of, error_label

Predicate = Callable[[ExchangeFacts], bool]


class FilterError(UserError):
    """A display filter that cannot be compiled; says where and why."""

    def __init__(self, message: str, expression: str, position: int) -> None:
        self.message = message
        self.expression = expression
        self.position = max(0, min(position, len(expression)))
        super().__init__(self.render())

    @property
    def column(self) -> int:
        """1-based column of the problem."""
        return self.position + 1

    def caret(self) -> str:
        return " " * self.position + "^"

    def render(self) -> str:
        return (f"bad display filter: {self.message} (column {self.column})\n"
                f"    {self.expression}\n    {self.caret()}")


# ----------------------------------------------------------------------------- lexer

@dataclass(frozen=True, slots=True)
class Token:
    kind: str      # LPAREN RPAREN LBRACE RBRACE COMMA DOTDOT OP STRING NUMBER WORD AND OR NOT EOF
    text: str      # source text (for STRING: the decoded value)
    pos: int
    value: Any = None   # NUMBER: int/float


_OPS = {"==": "==", "!=": "!=", "<=": "<=", ">=": ">=", "<": "<", ">": ">", "~": "matches",
        "=": "=="}
_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
             "contains": "contains", "matches": "matches"}
_WORD_RE = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.:\-/]*")
_INT_RE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)\Z")
_FLOAT_RE = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?\Z")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _number(text: str) -> int | float | None:
    if _INT_RE.match(text):
        digits = text.lstrip("-")
        sign = -1 if text.startswith("-") else 1
        if digits[:2].lower() == "0x":
            return sign * int(digits[2:], 16)
        return sign * int(digits, 10)
    if _FLOAT_RE.match(text):
        return float(text)
    return None


def tokenize(text: str) -> list[Token]:
    """Split an expression into tokens; raises :class:`FilterError` on bad characters."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        two = text[i:i + 2]
        if two in ("&&", "||"):
            tokens.append(Token("AND" if two == "&&" else "OR", two, i))
            i += 2
            continue
        if two in ("==", "!=", "<=", ">="):
            tokens.append(Token("OP", _OPS[two], i))
            i += 2
            continue
        if two == "..":
            tokens.append(Token("DOTDOT", "..", i))
            i += 2
            continue
        if c in "<>~=":
            tokens.append(Token("OP", _OPS[c], i))
            i += 1
            continue
        if c == "!":
            tokens.append(Token("NOT", "!", i))
            i += 1
            continue
        simple = {"(": "LPAREN", ")": "RPAREN", "{": "LBRACE", "}": "RBRACE", ",": "COMMA"}
        if c in simple:
            tokens.append(Token(simple[c], c, i))
            i += 1
            continue
        if c in "\"'":
            start = i
            i += 1
            out: list[str] = []
            while True:
                if i >= n:
                    raise FilterError("unterminated string (missing closing quote)", text, start)
                ch = text[i]
                if ch == c:
                    i += 1
                    break
                if ch == "\\":
                    if i + 1 >= n:
                        raise FilterError("unterminated string (missing closing quote)", text,
                                          start)
                    esc = text[i + 1]
                    if esc in _ESCAPES:
                        out.append(_ESCAPES[esc])
                        i += 2
                        continue
                    if esc == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                        out.append(chr(int(text[i + 2:i + 4], 16)))
                        i += 4
                        continue
                    # Unknown escapes are kept verbatim (useful inside regexes: "\d").
                    out.append("\\" + esc)
                    i += 2
                    continue
                out.append(ch)
                i += 1
            tokens.append(Token("STRING", "".join(out), start))
            continue
        m = _WORD_RE.match(text, i)
        if m:
            word = m.group()
            # "0..3" is a range: stop the word at "..".
            cut = word.find("..")
            if cut > 0:
                word = word[:cut]
            num = _number(word)
            lower = word.lower()
            if num is not None:
                tokens.append(Token("NUMBER", word, i, num))
            elif lower == "and":
                tokens.append(Token("AND", word, i))
            elif lower == "or":
                tokens.append(Token("OR", word, i))
            elif lower == "not":
                tokens.append(Token("NOT", word, i))
            else:
                tokens.append(Token("WORD", word, i))
            i += len(word)
            continue
        raise FilterError(f"unexpected character {c!r}", text, i)
    tokens.append(Token("EOF", "", n))
    return tokens


# ----------------------------------------------------------------------------- parser

@dataclass(slots=True)
class _Value:
    kind: str          # "string", "number"
    text: str          # the string, or the number's source text
    pos: int
    number: int | float | None = None
    quoted: bool = False


#: parentheses and 'not' nested deeper than this are refused (bounded recursion)
MAX_NESTING = 64


class RunAnnotations:
    """Run-state field values of the exchanges the whole-run pass has let through and
    the selection has not evaluated yet: ``exchange index -> (exchange, {field: value})``
    (the pass removes an entry once the next exchange is asked for)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[Any, tuple[Any, dict[str, Any]]] = {}

    def getter(self, spec: FieldSpec) -> Callable[[ExchangeFacts], Any]:
        """``get(facts)`` of the run-state field ``spec`` reading these values."""
        values = self.values
        name = spec.name
        static = spec.get       # the value when the pass gave none

        def get(f: ExchangeFacts) -> Any:
            ex = f.exchange
            entry = values.get(ex.index)
            if entry is None or entry[0] is not ex or name not in entry[1]:
                return static(f)
            return entry[1][name]
        return get


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.annotations = RunAnnotations()
        self.run_fields: set[str] = set()

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "EOF":
            self.i += 1
        return tok

    def error(self, message: str, pos: int | None = None) -> FilterError:
        return FilterError(message, self.text, self.tok.pos if pos is None else pos)

    def describe(self, tok: Token) -> str:
        return "end of expression" if tok.kind == "EOF" else repr(tok.text)

    def parse(self) -> Predicate:
        if self.tok.kind == "EOF":
            raise self.error("empty expression")
        pred = self.parse_or()
        if self.tok.kind != "EOF":
            tok = self.tok
            if tok.kind == "RPAREN":
                raise self.error("unmatched ')'")
            raise self.error("expected 'and', 'or' or end of expression, "
                             f"found {self.describe(tok)}")
        return pred

    def parse_or(self) -> Predicate:
        parts = [self.parse_and()]
        while self.tok.kind == "OR":
            self.advance()
            parts.append(self.parse_and())
        if len(parts) == 1:
            return parts[0]
        return lambda f, ps=tuple(parts): any(p(f) for p in ps)

    def parse_and(self) -> Predicate:
        parts = [self.parse_not()]
        while self.tok.kind == "AND":
            self.advance()
            parts.append(self.parse_not())
        if len(parts) == 1:
            return parts[0]
        return lambda f, ps=tuple(parts): all(p(f) for p in ps)

    def parse_not(self) -> Predicate:
        tok = self.tok
        if tok.kind in ("NOT", "LPAREN"):
            if self.depth >= MAX_NESTING:
                raise self.error(f"expression nested too deeply (more than {MAX_NESTING} "
                                 "levels of parentheses and 'not')")
            self.depth += 1
            try:
                return self._parse_nested(tok)
            finally:
                self.depth -= 1
        return self.parse_test()

    def _parse_nested(self, tok: Token) -> Predicate:
        """``not`` or a parenthesised expression (``tok`` is the NOT or LPAREN token)."""
        self.advance()
        if tok.kind == "NOT":
            inner = self.parse_not()
            return lambda f: not inner(f)
        if self.tok.kind == "RPAREN":
            raise self.error("empty parentheses")
        inner = self.parse_or()
        if self.tok.kind != "RPAREN":
            raise self.error(f"expected ')' to close the '(' at column {tok.pos + 1}, "
                             f"found {self.describe(self.tok)}")
        self.advance()
        return inner

    def parse_test(self) -> Predicate:
        tok = self.tok
        if tok.kind != "WORD":
            if tok.kind == "EOF":
                raise self.error("expected a field name, found end of expression")
            raise self.error(f"expected a field name, found {self.describe(tok)}")
        name = canonical_field(tok.text)
        spec = FIELDS.get(name) if name is not None else None
        if spec is None:
            raise self.error(f"unknown field '{tok.text}'{_unknown_field_hint(tok.text)}")
        if spec.run_state:
            self.run_fields.add(spec.name)
            spec = replace(spec, get=self.annotations.getter(spec))
        self.advance()
        op_tok = self.tok
        negate_in = False
        if op_tok.kind == "NOT" and op_tok.text.lower() == "not":
            nxt = self.tokens[self.i + 1]
            if nxt.kind == "WORD" and nxt.text.lower() == "in":
                self.advance()
                op_tok = self.tok
                negate_in = True
        if op_tok.kind == "OP":
            op = op_tok.text
        elif op_tok.kind == "WORD" and op_tok.text.lower() in _WORD_OPS:
            op = _WORD_OPS[op_tok.text.lower()]
        elif op_tok.kind == "WORD" and op_tok.text.lower() == "in":
            op = "in"
        elif op_tok.kind in ("EOF", "AND", "OR", "RPAREN"):
            return _presence(spec)
        else:
            raise self.error(f"expected an operator (==, !=, <, <=, >, >=, contains, matches, in) "
                             f"after '{spec.name}', found {self.describe(op_tok)}")
        self.advance()
        if op == "in":
            items = self.parse_set(spec)
            pred = _compile_in(spec, items, self)
            if negate_in:
                return lambda f: not pred(f)
            return pred
        value = self.parse_value(op)
        return _compile_compare(spec, op, value, op_tok.pos, self)

    def parse_value(self, after: str) -> _Value:
        tok = self.tok
        if tok.kind == "STRING":
            self.advance()
            return _Value("string", tok.text, tok.pos, quoted=True)
        if tok.kind == "NUMBER":
            self.advance()
            return _Value("number", tok.text, tok.pos, tok.value)
        if tok.kind == "WORD":
            self.advance()
            return _Value("string", tok.text, tok.pos)
        raise self.error(f"expected a value after '{after}', found {self.describe(tok)}")

    def parse_set(self, spec: FieldSpec) -> list[tuple[_Value, _Value | None]]:
        if self.tok.kind != "LBRACE":
            raise self.error(f"expected '{{' after 'in', found {self.describe(self.tok)}")
        open_pos = self.tok.pos
        self.advance()
        items: list[tuple[_Value, _Value | None]] = []
        while True:
            if self.tok.kind == "RBRACE":
                if not items:
                    raise self.error("empty set '{}'")
                self.advance()
                return items
            if self.tok.kind == "EOF":
                raise self.error(f"expected '}}' to close the '{{' at column {open_pos + 1}")
            if items and self.tok.kind == "COMMA":
                self.advance()
                continue
            low = self.parse_value("{")
            high = None
            if self.tok.kind == "DOTDOT":
                if not spec.numeric and spec.type != "error":
                    raise self.error(f"a range needs a numeric field; '{spec.name}' is not",
                                     low.pos)
                dots = self.advance()
                high = self.parse_value("..")
                if low.kind != "number" or high.kind != "number":
                    raise self.error("a range needs numbers on both sides of '..'", dots.pos)
            items.append((low, high))


# ----------------------------------------------------------------------------- compiler

def _presence(spec: FieldSpec) -> Predicate:
    get = spec.get
    if spec.multi:
        return lambda f: bool(get(f))
    return lambda f: get(f) not in (None, "")


def _check_number(spec: FieldSpec, value: _Value, parser: _Parser) -> int | float:
    if value.kind != "number":
        raise parser.error(f"field '{spec.name}' is a number; {value.text!r} is not", value.pos)
    assert value.number is not None
    return value.number


def _order(op: str) -> Callable[[Any, Any], bool]:
    return {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    }[op]


def _lift(spec: FieldSpec, test: Callable[[Any], bool]) -> Predicate:
    """Apply a per-value test to a field, with any-semantics for multi-valued fields."""
    get = spec.get
    if spec.multi:
        def multi(f: ExchangeFacts) -> bool:
            for v in get(f):
                try:
                    if test(v):
                        return True
                except TypeError:
                    continue
            return False
        return multi

    def single(f: ExchangeFacts) -> bool:
        v = get(f)
        if v is None:
            return False
        try:
            return test(v)
        except TypeError:
            return False
    return single


def _value_test(spec: FieldSpec, op: str, value: _Value, parser: _Parser
                ) -> tuple[FieldSpec, Callable[[Any], bool]]:
    """A per-value test for ``spec op value`` (op is never '!='); may switch the field."""
    if op in ("contains", "matches"):
        if spec.numeric:
            raise parser.error(f"'{op}' needs a text field; '{spec.name}' is a number", value.pos)
        as_text = (lambda v: error_label(v)) if spec.type == "error" else str
        if op == "contains":
            needle = value.text
            if spec.type in ("name", "error"):
                needle_l = needle.lower()
                return spec, lambda v: needle_l in as_text(v).lower()
            return spec, lambda v: needle in as_text(v)
        try:
            rx = re.compile(value.text)
        except re.error as err:
            pos = value.pos + int(value.quoted) + (err.pos or 0)
            raise parser.error(f"bad regular expression: {err.msg}", pos) from None
        search = rx.search
        return spec, lambda v: search(as_text(v)) is not None

    cmp = _order(op)
    if spec.numeric:
        num = _check_number(spec, value, parser)
        return spec, lambda v: cmp(v, num)

    if spec.type == "error":
        if value.kind == "number":
            code = value.number
        else:
            code = error_code_of(value.text)
            if code is None:
                raise parser.error(f"unknown error name {value.text!r}"
                                   + _suggest_hint(value.text.upper(), spec), value.pos)
        return spec, lambda v: cmp(v, code)

    if spec.name == "api" and value.kind == "number":
        return FIELDS["api_key"], lambda v: cmp(v, value.number)

    if spec.type == "name":
        text = value.text.lower()
        if op in ("==",) and spec.choices is not None:
            known = [c.lower() for c in spec.choices()]
            if known and text not in known:
                raise parser.error(f"unknown {spec.name} {value.text!r}"
                                   + _suggest_hint(value.text, spec), value.pos)
        return spec, lambda v: cmp(v.lower(), text)

    if spec.type == "address":
        text = value.text
        if op != "==":
            raise parser.error(f"operator '{op}' does not apply to address field '{spec.name}'; "
                               "use ==, !=, contains or matches", value.pos)
        if _is_ip(text):
            ip_norm = str(ipaddress.ip_address(text))
            return spec, lambda v: _ip_part(v) == ip_norm
        return spec, lambda v: v == text

    # plain strings
    text = value.text
    return spec, lambda v: cmp(v, text)


def _unknown_field_hint(text: str) -> str:
    """"; did you mean ..." for a field name that is not one: the kwsniff fields for a
    Wireshark name of one direction, the closest alias for a dotted Wireshark-style
    name, else the closest kwsniff field."""
    low = text.lower()
    if low in WIRESHARK_HINTS:
        return f"; an exchange goes both ways: use {WIRESHARK_HINTS[low]}"
    if "." in low:      # a Wireshark name or a plugin field
        dotted = [*WIRESHARK_ALIASES, *(n for n in FIELDS if "." in n)]
        close = difflib.get_close_matches(low, dotted, n=1, cutoff=0.75)
        if close and close[0] in WIRESHARK_ALIASES:
            return f"; did you mean '{close[0]}' ({WIRESHARK_ALIASES[close[0]]})?"
        if close:
            return f"; did you mean '{close[0]}'?"
        return "; see 'kwsniff decode --list-fields'"
    close = difflib.get_close_matches(low, list(FIELDS), n=1)
    return f"; did you mean '{close[0]}'?" if close else "; see 'kwsniff decode --list-fields'"


def _suggest_hint(text: str, spec: FieldSpec) -> str:
    if spec.choices is None:
        return ""
    choices = spec.choices()
    close = difflib.get_close_matches(text, choices, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[m] for m in difflib.get_close_matches(text.lower(), list(lowered), n=1)]
    return f"; did you mean {close[0]!r}?" if close else ""


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ip_part(addr: str) -> str:
    if addr.startswith("["):
        return addr[1:addr.find("]")]
    return addr.rsplit(":", 1)[0]


def _compile_compare(spec: FieldSpec, op: str, value: _Value, op_pos: int,
                     parser: _Parser) -> Predicate:
    if op == "!=":
        target, test = _value_test(spec, "==", value, parser)
        pred = _lift(target, test)
        return lambda f: not pred(f)
    if op in ("<", "<=", ">", ">=") and spec.type == "address":
        raise parser.error(f"operator '{op}' does not apply to address field '{spec.name}'",
                           op_pos)
    target, test = _value_test(spec, op, value, parser)
    return _lift(target, test)


def _compile_in(spec: FieldSpec, items: list[tuple[_Value, _Value | None]],
                parser: _Parser) -> Predicate:
    preds: list[Predicate] = []
    exact_numbers: set[int | float] = set()
    for low, high in items:
        if high is not None:
            if not spec.numeric and spec.type != "error":
                raise parser.error(f"a range needs a numeric field; '{spec.name}' is not",
                                   low.pos)
            lo = _check_number(spec, low, parser)
            hi = _check_number(spec, high, parser)
            preds.append(_lift(spec, lambda v, lo=lo, hi=hi: lo <= v <= hi))
        elif spec.numeric:
            exact_numbers.add(_check_number(spec, low, parser))
        else:
            target, test = _value_test(spec, "==", low, parser)
            preds.append(_lift(target, test))
    if exact_numbers:
        preds.append(_lift(spec, lambda v, s=frozenset(exact_numbers): v in s))
    if len(preds) == 1:
        return preds[0]
    return lambda f, ps=tuple(preds): any(p(f) for p in ps)


# ----------------------------------------------------------------------------- public API

class DisplayFilter:
    """A compiled display filter."""

    __slots__ = ("expression", "_pred", "run_fields", "annotations")

    def __init__(self, expression: str, pred: Predicate,
                 run_fields: frozenset[str] = frozenset(),
                 annotations: RunAnnotations | None = None) -> None:
        self.expression = expression
        self._pred = pred
        #: run-state fields the expression names (see the module contract)
        self.run_fields = run_fields
        self.annotations = annotations if annotations is not None else RunAnnotations()

    def matches(self, facts: ExchangeFacts) -> bool:
        """True when the exchange passes the filter; never raises."""
        try:
            return bool(self._pred(facts))
        except Exception:  # noqa: BLE001 - an odd exchange simply does not match
            return False

    def __repr__(self) -> str:
        return f"DisplayFilter({self.expression!r})"


def compile_filter(expression: str) -> DisplayFilter:
    """Compile ``expression``; raises :class:`FilterError` with the position on mistakes."""
    parser = _Parser(expression)
    pred = parser.parse()
    return DisplayFilter(expression, pred, frozenset(parser.run_fields), parser.annotations)


def check_filter(expression: str) -> FilterError | None:
    """The error of ``expression``, or None when it compiles (validation as you type)."""
    try:
        compile_filter(expression)
    except FilterError as err:
        return err
    return None


_OPERATOR_WORDS = ["==", "!=", "<", "<=", ">", ">=", "contains", "matches", "in"]


def suggest(text: str) -> list[str]:
    """Completions for the word at the end of ``text`` (field names, operators, values).

    Returns full replacement words for the last token (or, after a space, for the next
    one): field names where a field is expected, operators after a field, and known values
    (API names, statuses, error names) after a comparison operator.
    """
    partial = ""
    try:
        tokens = tokenize(text)[:-1]
        ends_with_space = not text or text[-1].isspace()
    except FilterError as err:
        # A string still being typed: complete its text.
        if not err.message.startswith("unterminated string"):
            return []
        try:
            tokens = tokenize(text[:err.position])[:-1]
        except FilterError:
            return []
        partial = text[err.position + 1:]
        ends_with_space = False
    else:
        if tokens and not ends_with_space and tokens[-1].kind in ("WORD", "NUMBER", "STRING"):
            partial = tokens.pop().text
    prev = tokens[-1] if tokens else None
    if prev is None or prev.kind in ("AND", "OR", "NOT", "LPAREN"):
        return [n for n in FIELDS if n.startswith(partial.lower())]
    if prev.kind == "WORD" and canonical_field(prev.text) is not None:
        return [o for o in _OPERATOR_WORDS if o.startswith(partial.lower())]
    if prev.kind in ("OP", "LBRACE", "COMMA") or (prev.kind == "WORD" and prev.text.lower() in
                                                  _WORD_OPS):
        field_name = next((canonical_field(t.text) for t in reversed(tokens)
                           if t.kind == "WORD" and canonical_field(t.text) is not None), None)
        if field_name is None:
            return []
        spec = FIELDS[field_name]
        if spec.choices is None:
            return []
        low = partial.lower()
        return [f'"{c}"' for c in spec.choices() if c.lower().startswith(low)]
    return ["and", "or"] if not partial else [w for w in ("and", "or") if w.startswith(partial)]
