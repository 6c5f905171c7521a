"""Transport: the session wrapper (auth, retries, redirects, error mapping)."""
