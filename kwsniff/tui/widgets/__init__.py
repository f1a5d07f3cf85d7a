"""Widgets of the TUI: virtual tables, detail tree, hex view, filter bar."""
