"""The display-filter bar: the ``-Y`` language, validated as you type, with completion.

Contract:

* :class:`FilterBar` holds an input and a message line. Every edit is checked with
  :func:`kwsniff.output.filter.check_filter`; a mistake shows its message and a caret
  under the column it points at, and the input turns red. Valid text shows the
  completions :func:`kwsniff.output.filter.suggest` offers for the word being typed
  (field names, operators, known values).
* Completion: the first candidate appears as ghost text (→ accepts it). Tab completes
  the word being typed (field name, operator or value): a single candidate is taken
  whole (with a space, so the next completions follow), several are completed to their
  common prefix, and when that adds nothing Tab cycles through them (Shift+Tab
  backwards). Tab never moves the focus out of the bar; Escape leaves it.
* Values are completed as typed: bare (``api == Fetch``) unless a quote was opened or
  the value needs one; letter case need not match (``error == unsup``).
* Enter on valid (or empty) text posts :class:`FilterBar.Applied`; Escape posts
  :class:`FilterBar.Cancelled` (the owner moves the focus away).
* :func:`completions` is the pure function behind it: full candidate texts for
  ``text``; :func:`tab_complete` the Tab step.
"""

from __future__ import annotations

import re
from os.path import commonprefix

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import Input, Label, Static

from kwsniff.output.filter import FilterError, check_filter, suggest, tokenize
from kwsniff.tui.rowfacts import is_fast, is_screened

MAX_SHOWN = 12
PLACEHOLDER = ('(Tab completes, Enter applies) e.g. api == Produce and latency_ms > 5, '
               'error, topic contains "orders"')


_BARE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-/]*\Z")
_KEYWORDS = frozenset({"and", "or", "not", "in", "contains", "matches", "eq", "ne", "lt",
                       "le", "gt", "ge"})


def _as_typed(candidate: str, typed: str) -> str:
    """A quoted value candidate without its quotes when the user did not open one and
    the value is a plain word (the filter language takes both)."""
    if len(candidate) >= 2 and candidate[0] == '"' and candidate[-1] == '"' and \
            not typed.startswith(("'", '"')):
        inner = candidate[1:-1]
        if _BARE_RE.match(inner) and inner.lower() not in _KEYWORDS:
            return inner
    return candidate


def completions(text: str) -> list[str]:
    """Full replacement texts for the word at the end of ``text``."""
    try:
        tokens = tokenize(text)[:-1]
        prefix = text
        if text and not text[-1].isspace() and tokens:
            last = tokens[-1]
            if last.kind in ("WORD", "NUMBER", "STRING"):
                prefix = text[:last.pos]
    except FilterError as err:
        if not err.message.startswith("unterminated string"):
            return []
        prefix = text[:err.position]
    try:
        candidates = suggest(text)
    except Exception:  # noqa: BLE001 - completion is a convenience
        return []
    typed = text[len(prefix):]
    return [prefix + _as_typed(c, typed) for c in candidates]


def _replaced_from(text: str, cands: list[str]) -> int:
    """Where the word the candidates replace starts (they all keep ``text[:i]``)."""
    i = len(commonprefix([text, *cands]))
    # back to the start of the word being typed (cands may differ in letter case)
    while i > 0 and not text[i - 1].isspace() and text[i - 1] not in "(!=<>~{,":
        i -= 1
    return i


def tab_complete(text: str) -> tuple[str, list[str]]:
    """The Tab step for ``text``: ``(new_text, cycle)``. ``new_text`` is ``text`` with
    its last word completed (the single candidate plus a space, or the longest common
    prefix of several); ``cycle`` is the list of full candidates to cycle through when
    that prefix adds nothing (empty otherwise). No candidate: ``(text, [])``."""
    cands = completions(text)
    if not cands:
        return text, []
    if len(cands) == 1:
        only = cands[0]
        return (only if only.endswith(" ") else only + " "), []
    start = _replaced_from(text, cands)
    typed = text[start:]
    words = [c[start:] for c in cands]
    common = commonprefix(words)
    if len(common) > len(typed) and common.lower().startswith(typed.lower()):
        return text[:start] + common, []
    return text, cands


class FilterSuggester(Suggester):
    """Ghost-text completion from :func:`completions`."""

    def __init__(self) -> None:
        super().__init__(use_cache=True, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        low = value.lower()
        for cand in completions(value):
            if cand.lower().startswith(low) and len(cand) > len(value):
                return cand
        return None


class FilterInput(Input):
    """The input of the filter bar; Tab completes (see the module contract)."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False, priority=True),
                Binding("shift+tab", "complete(-1)", "Previous completion", show=False,
                        priority=True)]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        #: (candidates, index, the text the last cycling step produced)
        self._cycle: tuple[list[str], int, str] | None = None

    def action_complete(self, step: int = 1) -> None:
        value = self.value
        cycle = self._cycle
        if cycle is not None and cycle[2] == value and cycle[0]:
            cands, index, _ = cycle
            index = (index + step) % len(cands)
        else:
            new, cands = tab_complete(value)
            if not cands:
                self._cycle = None
                if new == value:
                    self.app.bell()
                self._set(new)
                return
            # start after the candidate already typed (if one is), else at the first
            index = (cands.index(value) + step) % len(cands) if value in cands else \
                (0 if step > 0 else len(cands) - 1)
        self._set(cands[index])
        self._cycle = (cands, index, cands[index])

    def _set(self, value: str) -> None:
        self.value = value
        self.cursor_position = len(value)


class FilterBar(Vertical):
    """See the module contract."""

    class Applied(Message):
        """The user applied ``expression`` ("" = no filter)."""

        def __init__(self, expression: str) -> None:
            super().__init__()
            self.expression = expression

    class Cancelled(Message):
        """Escape in the filter bar."""

    BINDINGS = [Binding("escape", "cancel", "Leave filter", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.applied = ""
        self.error: FilterError | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="filter-row"):
            yield Label("Filter", id="filter-label")
            yield FilterInput(placeholder=PLACEHOLDER, suggester=FilterSuggester(),
                              id="filter-input")
        yield Static("", id="filter-message")

    @property
    def input(self) -> FilterInput:
        return self.query_one(FilterInput)

    def set_expression(self, text: str) -> None:
        """Put ``text`` into the input (validated) without applying it."""
        self.input.value = text
        self.validate(text)

    def validate(self, text: str) -> FilterError | None:
        """Check ``text`` and update the message line; returns the error, if any."""
        message = self.query_one("#filter-message", Static)
        inp = self.input
        stripped = text.strip()
        if not stripped:
            self.error = None
            inp.remove_class("-invalid")
            message.update(layout=False, content=Text("no filter: all exchanges" +
                                (" (Enter to clear the applied filter)" if self.applied else ""),
                                style="dim"))
            return None
        err = check_filter(text)
        self.error = err
        cands = _open_completions(text, completions(text))
        if err is not None and cands and not text[-1:].isspace() and \
                err.position >= len(text.rstrip()) - len(text.split()[-1]):
            # still typing the last word: offer its completions rather than an error
            inp.remove_class("-invalid")
            msg = Text("… ", style="yellow")
            msg.append(" ".join(_last_words(text, cands)) +
                       (" …" if len(cands) > MAX_SHOWN else ""))
            msg.append("   (Tab completes)", style="dim")
            message.update(layout=False, content=msg)
            return err
        if err is not None:
            inp.add_class("-invalid")
            msg = Text()
            msg.append(" " * err.position + "^ ", style="bold red")
            msg.append(f"{err.message} (column {err.column})", style="red")
            message.update(layout=False, content=msg)
            return err
        inp.remove_class("-invalid")
        msg = Text("✓ valid", style="green")
        if is_screened(text):
            msg.append(" · re-decodes the exchanges that may have these fields",
                       style="yellow")
        elif not is_fast(text):
            msg.append(" · re-decodes every exchange (fields not kept in the list)",
                       style="yellow")
        if text.strip() != self.applied:
            msg.append(" · Enter to apply", style="dim")
        if cands and not text[-1:].isspace():
            shown = " ".join(_last_words(text, cands))
            if shown:
                msg.append("   completions: ", style="dim")
                msg.append(shown + (" …" if len(cands) > MAX_SHOWN else ""))
        elif text[-1:].isspace():
            if cands:
                msg.append("   next: ", style="dim")
                msg.append(" ".join(c[len(text):] for c in cands[:MAX_SHOWN]) +
                           (" …" if len(cands) > MAX_SHOWN else ""))
        message.update(layout=False, content=msg)
        return None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.validate(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if self.validate(event.value) is not None:
            self.app.bell()
            return
        self.applied = text
        self.validate(event.value)
        self.post_message(self.Applied(text))

    def action_cancel(self) -> None:
        self.post_message(self.Cancelled())


def _open_completions(text: str, cands: list[str]) -> list[str]:
    """``cands`` without those that only repeat the word already typed (quotes aside)."""
    words = text.split()
    if not words or text[-1:].isspace():
        return cands
    typed = words[-1].strip("\"'").lower()
    return [c for c in cands if (c.split() or [""])[-1].strip("\"'").lower() != typed]


def _last_words(text: str, cands: list[str]) -> list[str]:
    """The completed last words of the first candidates (what the user chooses from)."""
    words = [c[len(_common_prefix(text, c)):] for c in cands[:MAX_SHOWN]]
    return [w for w in words if w]


def _common_prefix(text: str, cand: str) -> str:
    """The part of ``cand`` that replaces nothing new: up to the start of the last word."""
    i = 0
    while i < len(text) and i < len(cand) and text[i] == cand[i]:
        i += 1
    # show whole candidate words, not the tail after the typed letters
    while i > 0 and not cand[i - 1].isspace() and cand[i - 1] not in "(!=<>~{,":
        i -= 1
    return cand[:i]
