"""The audit log: security-relevant actions, who did them and to what, for admins."""
