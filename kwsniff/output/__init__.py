"""Output: summary lines, detail tree, hex dump, display filters, stats, JSON Lines."""
