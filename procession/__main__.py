"""``python -m procession demo`` (the same as the ``procession`` command)."""

from procession.runtime._demo import main

raise SystemExit(main())
