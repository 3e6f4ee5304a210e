"""Limits of database ids, shared by every app that takes ids from users."""

# The largest primary key the databases store (64-bit signed); a query with a larger one
# overflows in the driver (a 500), so input beyond it is refused or ignored first.
MAX_ID = 2**63 - 1
