"""Documents, not just passages: parsers (parse.py) and splitters (split.py)."""
