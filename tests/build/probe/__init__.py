"""Fixture package of tests/build (never shipped)."""
