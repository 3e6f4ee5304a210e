"""Read-only inventory API: every signed-in user may see the lab; admins edit in the admin."""

from rest_framework import serializers, viewsets

from .models import Device, Host


class HostSerializer(serializers.ModelSerializer):
    class Meta:
        model = Host
        fields = [
            "id",
            "name",
            "address",
            "port",
            "enabled",
            "status",
            "last_seen",
            "last_probe_at",
            "last_error",
            "host_key_fingerprint",
        ]


class DeviceSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Device
        fields = [
            "id",
            "host",
            "index",
            "uuid",
            "name",
            "memory_total_mib",
            "status",
            "first_seen",
            "last_seen",
        ]


class HostViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Host.objects.all()
    serializer_class = HostSerializer


class DeviceViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Device.objects.select_related("host")
    serializer_class = DeviceSerializer
