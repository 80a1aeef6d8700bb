"""``json_schema``, whose home is now ``procession.wire`` (shared with the
built-in processors); kept so the old import path still works."""

from ...wire import json_schema

__all__ = ["json_schema"]
