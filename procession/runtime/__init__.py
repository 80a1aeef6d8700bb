"""procession.runtime."""
