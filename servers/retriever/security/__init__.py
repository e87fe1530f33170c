"""What a caller may do: paths inside the operator's roots (guard), the HTTP front door (http_guard,
http_limits), per-call limits (limits) and secrets kept out of every message (redaction)."""
