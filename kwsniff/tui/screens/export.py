"""The export dialog: where to write the current view as JSON Lines.

Contract: :class:`ExportScreen` asks for a path (pre-filled) and dismisses with the
path (Enter) or None (Escape). The writing itself is
:func:`kwsniff.tui.export.export_rows`.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class ExportScreen(ModalScreen[str | None]):
    """See the module contract."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_path: str, shown: int, what: str) -> None:
        super().__init__()
        self.default_path = default_path
        self.shown = shown
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical(id="export-dialog"):
            yield Label(Text(f"Export {self.shown} exchange{'s' if self.shown != 1 else ''} "
                             f"({self.what}) as JSON Lines to:"))
            yield Input(self.default_path, id="export-path")
            yield Label("Enter writes the file (replacing it), Escape cancels.",
                        classes="dim")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        path = event.value.strip()
        self.dismiss(path or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
