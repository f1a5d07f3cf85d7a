"""Textual TUI."""
