"""The profile page for API tokens, and the login views that show sign-in limits."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import LoginView, PasswordResetView
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core.clients import Limit, client_address

from .forms import NewTokenForm
from .models import ApiToken
from .services import issue_token, revoke_token
from .signin import SignInForm


class LimitedPasswordResetForm(PasswordResetForm):
    """Reset mails limited per asking address and per recipient, so nobody can flood a
    victim's mailbox through us. Over a limit nothing is sent and the page reads the same
    as always (it never says whether an account has that address)."""

    HOUR = 3600

    def save(self, *args, request=None, **kwargs):
        per_address = Limit("reset-address", settings.PASSWORD_RESET_MAILS_PER_ADDRESS, self.HOUR)
        if request is not None and per_address.take(client_address(request)):
            return None
        return super().save(*args, request=request, **kwargs)

    def send_mail(self, subject, body, context, from_email, to_email, *args, **kwargs):
        per_recipient = Limit(
            "reset-recipient", settings.PASSWORD_RESET_MAILS_PER_RECIPIENT, self.HOUR
        )
        if not per_recipient.take(to_email.casefold()):
            super().send_mail(subject, body, context, from_email, to_email, *args, **kwargs)


password_reset = PasswordResetView.as_view(form_class=LimitedPasswordResetForm)
sign_in = LoginView.as_view(authentication_form=SignInForm)
api_sign_in = LoginView.as_view(
    authentication_form=SignInForm, template_name="rest_framework/login.html"
)


@never_cache  # a new token's secret is on this page once: no copy in any cache
@login_required
def tokens(request):
    """One's tokens; a new token's secret is shown in this one answer and never again."""
    form = NewTokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            created = issue_token(request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            form = NewTokenForm()
    context = {
        "form": form,
        "tokens": ApiToken.objects.filter(user=request.user),
        "created": created and created[0],
        "secret": created and created[1],
        # The site's root, with the sub-path it may be served under (FORCE_SCRIPT_NAME).
        "api_url": request.build_absolute_uri(reverse("overview")),
    }
    return render(request, "apitokens/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def revoke(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    revoke_token(token, request.user)
    messages.success(request, f"Token {token.name!r} revoked; it no longer works.")
    return redirect("api-tokens")
