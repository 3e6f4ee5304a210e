"""Models of jobs (see its issue)."""
