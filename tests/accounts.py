"""Test personas and their UNIX accounts: mappings are explicit (issue 15), so tests that
speak of processes of "owner" or "other" as ps prints them map each persona to the UNIX
account named like it."""

from accesscontrol.services import profile_for


def mapped_to_own_name(user):
    """The user, with the UNIX account of the same name."""
    profile = profile_for(user)
    profile.unix_username = user.get_username()
    profile.save()
    return user
