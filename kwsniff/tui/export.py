"""Export of the TUI's current view as JSON Lines, with the export layer's encoder.

Contract: :func:`export_rows` writes one ``"exchange"`` object per row id (in the order
given: the view's order) with :class:`~kwsniff.output.jsonl.ExportEncoder` (the format
of ``kwsniff export``, docs/export-schema.md), then the ``"summary"`` object with the
run counters; it reports progress, stops early when ``cancelled()`` says so (the file
then holds what was written, without a summary), and returns an :class:`ExportResult`.
File errors raise :class:`~kwsniff.errors.UserError` with a one-line message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kwsniff.errors import UserError
from kwsniff.output.jsonl import ExportEncoder, JsonlWriter
from kwsniff.tui.store import ExchangeStore


@dataclass(slots=True)
class ExportResult:
    path: str
    exchanges: int
    missing: int          # rows that could not be re-read (dropped by the row limit)
    complete: bool        # False when cancelled


def export_rows(store: ExchangeStore, rows: Sequence[int], path: str, capture: str,
                counters: dict[str, int] | None, *,
                progress: Callable[[int, int], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> ExportResult:
    """Write ``rows`` of ``store`` to ``path`` (see the module contract)."""
    encoder = ExportEncoder(capture, names=store.names)
    missing = 0
    total = len(rows)
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            writer = JsonlWriter(fh, encoder)
            for n, row in enumerate(rows):
                if cancelled is not None and not n % 256 and cancelled():
                    return ExportResult(path, encoder.exchanges, missing, False)
                ex = store.exchange(row)
                if ex is None:
                    missing += 1
                    continue
                writer.write_exchange(ex)
                if progress is not None and not n % 1024:
                    progress(n, total)
            writer.write_summary(counters or {})
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    if progress is not None:
        progress(total, total)
    return ExportResult(path, encoder.exchanges, missing, True)
