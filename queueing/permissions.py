"""Who sees and acts on queued jobs: their owner (and superusers, who pass every rule).

Commands and logs of a job may hold secrets of the owner's work, so others do not see
them; the queue page shows each user their own jobs' positions among all.
"""

from django.db.models import Q

from accesscontrol.permissions import rule

from .models import QueuedJob

rule(QueuedJob, "view")(lambda user: Q(owner=user))
rule(QueuedJob, "change")(lambda user: Q(owner=user))
