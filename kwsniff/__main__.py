"""Allow ``python -m kwsniff``."""

from kwsniff.cli import main

raise SystemExit(main())
