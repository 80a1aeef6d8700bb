"""``python -m procession demo`` (the same as the ``procession`` command)."""

from ._demo import main

raise SystemExit(main())
