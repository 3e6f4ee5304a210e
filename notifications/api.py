"""Channels API: each user reads and edits only their own (admins too: URLs are secrets)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, serializers, viewsets
from rest_framework.permissions import IsAuthenticated

from .models import EVENTS, Channel, check_room, check_target


class ChannelSerializer(serializers.ModelSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENTS)), required=False
    )
    failing = serializers.BooleanField(read_only=True)

    class Meta:
        model = Channel
        fields = ["id", "kind", "target", "events", "enabled", "failing", "last_error",
                  "last_error_at", "last_success_at"]  # fmt: skip
        read_only_fields = ["last_error", "last_error_at", "last_success_at"]

    def validate(self, attrs):
        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        target = attrs.get("target", getattr(self.instance, "target", ""))
        try:
            check_target(kind, target)
            if self.instance is None:
                check_room(self.context["request"].user.pk)
        except DjangoValidationError as exc:
            errors = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
            raise exceptions.ValidationError(errors) from None
        return attrs


class ChannelViewSet(viewsets.ModelViewSet):
    """Where you are told about your bookings and jobs: mail and chat webhooks."""

    serializer_class = ChannelSerializer
    permission_classes = [IsAuthenticated]
    queryset = Channel.objects.all()

    def get_queryset(self):
        return Channel.objects.filter(user=self.request.user)

    def perform_create(self, serializer):
        serializer.save(user=self.request.user)
