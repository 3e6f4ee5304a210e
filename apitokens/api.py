"""API for one's own tokens: list, create (secret shown once), revoke; password login.

``POST /api/tokens/login/`` trades a user name and password for a new token, so the `hive`
client never stores a password. Creating a token needs a password or a browser session,
never another token: a leaked token cannot mint itself successors.
"""

from django.contrib.auth import authenticate
from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from . import services, signin
from .authentication import TokenAuthentication
from .models import ApiToken


class TokenSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(
        slug_field="username", read_only=True, help_text="Whose it is (who the caller is)."
    )
    state = serializers.ChoiceField(
        choices=["active", "expired", "revoked"], read_only=True, help_text="Usable or not."
    )

    class Meta:
        model = ApiToken
        fields = [
            "id", "user", "name", "prefix", "created", "expires", "last_used", "revoked", "state"
        ]  # fmt: skip
        read_only_fields = ["prefix", "created", "last_used", "revoked"]


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(
        read_only=True, help_text="The secret. Shown only in this answer: keep it now."
    )

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class TokenLoginSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, write_only=True)
    name = serializers.CharField(max_length=100, help_text="What the token is for.")
    expires = serializers.DateTimeField(required=False, allow_null=True)


def new_token_answer(user, name, expires=None) -> Response:
    token, secret = services.issue_token(user, name, expires)
    data = NewTokenSerializer(token).data
    data["token"] = secret
    response = Response(data, status=status.HTTP_201_CREATED)
    add_never_cache_headers(response)  # the secret must not stay in a cache on the way
    return response


class TokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """The signed-in user's own tokens (admins revoke others' in the admin)."""

    queryset = ApiToken.objects.all()
    serializer_class = TokenSerializer
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "tokens"

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(responses={201: NewTokenSerializer})
    def create(self, request):
        if isinstance(request.successful_authenticator, TokenAuthentication):
            raise exceptions.PermissionDenied(
                "A token cannot create tokens: use your password (POST /api/tokens/login/)."
            )
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return new_token_answer(request.user, **serializer.validated_data)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        """Revoke: the token stops working at once and stays listed as revoked."""
        services.revoke_token(self.get_object(), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TokenLoginSerializer, responses={201: NewTokenSerializer})
    @action(
        detail=False, methods=["post"], permission_classes=[AllowAny], authentication_classes=[]
    )
    def login(self, request):
        """A new token for a user name and password (what `hive login` calls)."""
        query = TokenLoginSerializer(data=request.data)
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        username, password = params.pop("username"), params.pop("password")
        wait = signin.wait_seconds(request, username)
        if wait:
            raise exceptions.Throttled(wait, signin.locked_message(request, username))
        user = authenticate(request, username=username, password=password)
        if user is None:
            raise exceptions.AuthenticationFailed("Wrong user name or password.")
        signin.clear(request, username)
        return new_token_answer(user, **params)
