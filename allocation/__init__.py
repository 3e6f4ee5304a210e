"""Allocation: who holds which GPUs, and who may start work on them.

The layer beneath every app that works on GPUs (jobs, the queue, protection, fair use, the
board), above the facts it reads (bookings, access, hosts):

- ``holders``: who holds a GPU over [start, end): bookings, tasks, queue runs' claims;
- ``rule``: the start rule, "may this user start on these GPUs now, and if not, why";
- ``placement`` and ``placing``: which GPUs a request for N of them gets (best fit).

It has no models: what holds a GPU is stored by the app that owns it (a booking's
``ReservedDevice``, a task's GPUs, the queue's ``GpuClaim``, which keeps two queue runs off
one GPU in the database). See docs/concepts.md, "Allocation".
"""
