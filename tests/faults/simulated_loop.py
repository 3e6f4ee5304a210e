"""The probing loop in a process of its own, as the workers run it, over simulated hosts.

    python -m tests.faults.simulated_loop SECONDS [SQLITE_FILE]

Every enabled host answers each cycle at once with a simulated probe (two GPUs, readings
that change every cycle; the GPUs are the hardware we lack): everything the loop writes is
real (the lease, the hosts and GPUs, the history, the cycle's record, the tasks its signal
queues). With SQLITE_FILE it uses the embedded profile's backend on that file (the test's
database), with SQLite's own busy wait cut to 50 ms, so that a write which does not wait its
turn fails at once instead of after 20 s of load. Prints {"cycles", "failures"} as JSON.
"""

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from django.conf import settings  # noqa: E402

if len(sys.argv) > 2:  # before the first connection is made
    settings.DATABASES["default"]["NAME"] = sys.argv[2]
    settings.DATABASES["default"]["OPTIONS"]["timeout"] = 0.05

from monitoring.loop import ProbeLoop  # noqa: E402
from monitoring.models import Host  # noqa: E402
from tests.monitoring.test_steady_recording import probe  # noqa: E402


class SimulatedLoop(ProbeLoop):
    """The loop, with every enabled host answering at once; failures kept to be printed."""

    def __init__(self):
        super().__init__(holder="simulated")
        self.failures = []

    def start_probes(self) -> None:
        pass  # nothing to ask: the simulated hosts answer in take_finished

    def take_finished(self, answers):
        hosts = Host.objects.filter(enabled=True).defer("last_snapshot")
        return [(host, probe(host, used=self.cycles % 50), 0.01) for host in hosts]

    def record_failure(self, message: str) -> None:
        self.failures.append(message)
        super().record_failure(message)


if __name__ == "__main__":
    loop = SimulatedLoop()
    loop.run(float(sys.argv[1]))
    print(json.dumps({"cycles": loop.cycles, "failures": loop.failures}))
