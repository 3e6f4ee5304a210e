"""The profile page for API tokens, and the login views that show sign-in limits."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from .forms import NewTokenForm
from .models import ApiToken
from .services import issue_token, revoke_token
from .signin import SignInForm

sign_in = LoginView.as_view(authentication_form=SignInForm)
api_sign_in = LoginView.as_view(
    authentication_form=SignInForm, template_name="rest_framework/login.html"
)


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
