"""Helpers the tests and the benches share (they need the test extra: pip install -e '.[test]')."""
