"""Signals other apps subscribe to, so monitoring never imports them.

``cycle_finished`` is sent after every probing cycle, once the probes are stored, with:

- ``host_ids``: ids of the hosts whose probe finished in this cycle (reachable or not);
- ``finished_at``: when the cycle was stored (an aware datetime).

Receivers run in the probing loop's worker: they should be quick (enqueue heavier work).
A receiver that raises does not stop the loop; its failure is recorded on the loop's
Activity row in the admin.
"""

from django.dispatch import Signal

cycle_finished = Signal()
