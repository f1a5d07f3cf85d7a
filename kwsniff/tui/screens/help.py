"""The help screen: key bindings, mouse use, and the display-filter fields.

Contract: :class:`HelpScreen` is a modal listing every key binding of the main screen
(from the app's binding table, so it never goes stale), what the mouse does, and the
display-filter fields of :func:`kwsniff.output.fields.field_help`; Escape, q or ?
closes it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from kwsniff.output.fields import field_help
from kwsniff.tui.rowfacts import FAST_FIELDS

MOUSE = """\
## Mouse

* Click a connection to show only its exchanges (the first line shows all again).
* Click an exchange to open it; click a column header to sort by it (again: reverse).
* Click a tree node to expand it; click a byte in the hex view to focus its field.
* The wheel scrolls every pane.
"""

FILTERS_INTRO = """\
## Display filter

The filter bar takes the language of `kwsniff decode -Y` (see docs/display-filters.md):
`api == Produce and latency_ms > 5`, `error`, `topic contains "orders"`,
`status in {unanswered, orphan_response}`, `not client_id matches "^rdkafka"`.
It is checked as you type (the caret points at a mistake); Tab or → completes field
names, operators and known values; Enter applies. Fields marked *slow* are not kept in
the list and make the filter re-decode every exchange.

| field | type | description |
|---|---|---|
"""


def help_markdown(bindings: list[tuple[str, str]]) -> str:
    """The help text for ``(keys, description)`` pairs."""
    lines = ["# kwsniff TUI", "", "## Keys", "", "| key | action |", "|---|---|"]
    for keys, desc in bindings:
        lines.append(f"| `{keys}` | {desc} |")
    lines += ["| `↑ ↓ PgUp PgDn Home End` | move in the focused list, tree or hex view |",
              "| `Tab` / `Shift+Tab` | next / previous pane |",
              "| `← →` (hex view) | move the byte cursor; the tree follows |",
              "| `Enter` / `Space` (tree) | expand or collapse a node |", ""]
    lines.append(MOUSE)
    lines.append(FILTERS_INTRO)
    for name, typ, desc in field_help():
        slow = "" if name in FAST_FIELDS else " *(slow)*"
        lines.append(f"| `{name}` | {typ} | {desc.replace('|', '/')}{slow} |")
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """See the module contract."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.key_help = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Markdown(help_markdown(self.key_help))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
