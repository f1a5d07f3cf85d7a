"""A plugin that cannot even be imported (tests: it is reported and skipped)."""

raise RuntimeError("this plugin is broken at import time")
