"""Coverage-guided fuzzing of kwsniff (atheris), one target per layer.

* :mod:`fuzz.wire` builds packets, captures, Kafka frames, record sets and the small
  "stream scripts" the structured targets read (shared with ``tests/robustness``).
* :mod:`fuzz.targets` holds the targets: each module has ``one_input(data)`` (raises
  only on a real finding), ``seeds()`` and ``MAX_LEN``.
* ``python -m fuzz.main TARGET [libFuzzer flags]`` runs one target under atheris.
* ``python -m fuzz.run`` runs every target for a bounded time and reports executions,
  coverage and findings (see docs/robustness.md).
"""
