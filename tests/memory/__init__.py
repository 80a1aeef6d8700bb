"""Tests of procession.memory."""
