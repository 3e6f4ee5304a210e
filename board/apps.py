from django.apps import AppConfig


class BoardConfig(AppConfig):
    """The pages that bring every app together: the GPU board (the landing page), the demo
    lab and the site's error pages. The top layer: it may import every other app."""

    name = "board"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from monitoring.connections import simulators

        from .demolab import transport_for

        # Every process that reaches hosts (workers, commands) reaches the demo's this way.
        if transport_for not in simulators:
            simulators.append(transport_for)
