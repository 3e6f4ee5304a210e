"""Models of accesscontrol (see its issue)."""
