"""Reservation protection: intruders on reserved GPUs are recorded and handled."""
