"""What a caller may do: who it is (principals, auth, oauth: static tokens and OAuth access tokens),
paths inside the operator's roots (guard), the HTTP front door (http_guard, http_limits), per-call
limits (limits) and secrets kept out of every message (redaction)."""
