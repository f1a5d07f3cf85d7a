"""The Textual TUI (``kwsniff tui``): see docs/tui.md.

Modules: ``app`` (the application), ``decoder`` (the decoding process) and ``loader``
(its UI side), ``rowbuild`` and ``store`` (compact rows), ``spill`` (exchanges on disk,
rebuilt on demand),
``rowfacts`` (display filters over rows), ``view`` (filtered and sorted views),
``statistics`` and ``charts`` (the statistics screen), ``export`` (JSON Lines of a
view), ``widgets/`` and ``screens/``. Importing this package does not import Textual.
"""
