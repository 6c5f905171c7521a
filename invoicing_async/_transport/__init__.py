"""Transport: the session wrapper (auth, rate budget, retries, redirects, error mapping)."""
