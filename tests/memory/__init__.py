"""Tests of procession.memory (a package, so that its conftest has a module
name of its own)."""
