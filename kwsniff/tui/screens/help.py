"""The help screen: key bindings, mouse use, and the display-filter fields.

Contract: :class:`HelpScreen` is a modal listing every key binding of the main screen
(from the app's binding table, so it never goes stale), what the mouse does, and the
display-filter fields of :func:`kwsniff.output.fields.field_help` (those that make a
filter re-decode exchanges marked *slow*); Escape, q or ? closes it.
"""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kwsniff.output.fields import field_help
from kwsniff.tui.rowfacts import FAST_FIELDS

EXTRA_KEYS = [
    ("↑ ↓ PgUp PgDn Home End", "move in the focused list, tree or hex view"),
    ("Enter", "exchange list: open the detail tree; connections: show only this one"),
    ("Tab / Shift+Tab", ("next / previous pane; in the filter bar: complete the word "
                         "(again: the next / previous candidate)")),
    ("Space / Enter", "detail tree: expand or collapse a node"),
    ("← → ↑ ↓", "hex view: move the byte cursor; the tree follows it"),
    ("Escape", "leave the filter bar or the search box; close a screen"),
    ("(small terminals)", ("under 120 columns Bytes and Connections are hidden, under 36 "
                           "lines Connections: b and c show them (Bytes under Detail)")),
]

MOUSE = [
    "Click a connection to show only its exchanges (the first line shows all again).",
    "Click an exchange to open it; click a column header to sort by it (again: reverse).",
    "Click a tree node to expand it; click a byte in the hex view to focus its field.",
    "The wheel scrolls every pane.",
]

FILTER_INTRO = (
    "The filter bar takes the language of kwsniff decode -Y (docs/display-filters.md): "
    'api == Produce and latency_ms > 5 · error · topic contains "orders" · '
    "status in {unanswered, orphan_response} · not client_id matches \"^rdkafka\". "
    "It is checked as you type (a caret points at a mistake); Tab completes field "
    "names, operators and known values (api == Fe, status == unan, error == unsup), "
    "again cycles through them; → takes the grey suggestion; Enter applies. Fields "
    "marked slow are not kept in the list: a filter using them re-decodes the exchanges "
    "that may have them (plugin fields: every exchange).")


def help_renderable(bindings: list[tuple[str, str]]) -> Group:
    """The help contents for ``(keys, description)`` pairs."""
    keys = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    keys.add_column("Key", style="bold yellow", no_wrap=True)
    keys.add_column("Action")
    for key, desc in bindings:
        keys.add_row(key, desc)
    for key, desc in EXTRA_KEYS:
        keys.add_row(key, desc)
    fields = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    fields.add_column("Field", style="bold cyan", no_wrap=True)
    fields.add_column("Type", no_wrap=True)
    fields.add_column("Description")
    for name, typ, desc in field_help():
        text = Text(desc)
        if name not in FAST_FIELDS:
            text.append(" (slow)", style="yellow")
        fields.add_row(name, typ, text)
    return Group(
        Text("kwsniff TUI", style="bold underline"), Text(""),
        Text("Keys", style="bold"), keys, Text(""),
        Text("Mouse", style="bold"), *[Text(f"• {m}") for m in MOUSE], Text(""),
        Text("Display filter", style="bold"), Text(FILTER_INTRO), Text(""), fields,
    )


class HelpScreen(ModalScreen[None]):
    """See the module contract."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.key_help = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(help_renderable(self.key_help))

    def action_close(self) -> None:
        self.dismiss(None)
