"""``python -m procession demo`` (the same as the ``procession`` command)."""

from ._cli import main

raise SystemExit(main())
