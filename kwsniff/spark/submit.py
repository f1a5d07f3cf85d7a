"""Entry script for ``spark-submit``: the kwsniff command line under a submitted driver.

Usage: ``spark-submit [--master URL ...] kwsniff/spark/submit.py analyze EXPORTS... --out DIR``
(or ``spark-decode ...``). The master and resources come from spark-submit; kwsniff's
own ``--master`` is then only needed to override them. See docs/spark.md.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def _import_path() -> None:
    """Run as a script, Python puts this file's folder first on ``sys.path``: drop it (its
    modules must not shadow top-level names) and make sure the package itself imports."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if importlib.util.find_spec("kwsniff") is None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(here)))


def main() -> int:
    _import_path()
    from kwsniff.cli import main as cli_main
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
