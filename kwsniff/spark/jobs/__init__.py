"""The analysis jobs: each module's ``compute(exports, options)`` returns named DataFrames.

Every job is a pure DataFrame transformation of :class:`kwsniff.spark.load.Exports`
(nothing is collected or written here); :mod:`kwsniff.spark.analyze` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AnalysisOptions:
    """Knobs shared by the jobs."""

    bucket: float = 1.0          # seconds per throughput bucket
    accuracy: int = 10_000       # percentile_approx accuracy (rank error about 1/accuracy)
