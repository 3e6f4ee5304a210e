"""Models of reservations (see its issue)."""
