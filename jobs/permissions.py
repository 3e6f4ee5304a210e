"""Who sees and acts on jobs: their owner (and superusers, who pass every rule).

Logs may hold secrets of the owner's work, so they follow "view": nobody else sees them.
Stopping follows "change"; starting is stricter still (services.check_may_run): only the
owner, because tasks run as the owner's UNIX account.
"""

from django.db.models import Q

from accesscontrol.permissions import rule

from .models import Job, Task

rule(Job, "view")(lambda user: Q(owner=user))
rule(Job, "change")(lambda user: Q(owner=user))
rule(Job, "delete")(lambda user: Q(owner=user))
rule(Task, "view")(lambda user: Q(job__owner=user))
rule(Task, "change")(lambda user: Q(job__owner=user))
