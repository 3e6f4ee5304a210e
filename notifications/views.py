"""The user's notification page: channels, the events each gets, recent deliveries."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .forms import ChannelForm
from .models import EVENTS, Channel, Delivery


@login_required
def channels_page(request):
    form = ChannelForm(request.POST or None, initial={"events": list(EVENTS)}, user=request.user)
    if request.method == "POST" and form.is_valid():
        channel = form.save()
        messages.success(request, f"{channel.get_kind_display()} channel added.")
        return redirect("notifications")
    return render(request, "notifications/channels.html", page_context(request, form),
                  status=400 if form.errors else 200)  # fmt: skip


def page_context(request, form) -> dict:
    channels = request.user.channels.all()
    forms = [(c, ChannelForm(instance=c, prefix=f"c{c.pk}")) for c in channels]
    deliveries = Delivery.objects.filter(channel__user=request.user).select_related("channel")
    return {"form": form, "channels": forms, "deliveries": deliveries[:30]}


def own_channel(request, pk) -> Channel:
    # Another user's channel answers 404: its URL may be a secret.
    return get_object_or_404(Channel, pk=pk, user=request.user)


@login_required
@require_POST
def edit_channel(request, pk):
    channel = own_channel(request, pk)
    form = ChannelForm(request.POST, instance=channel, prefix=f"c{channel.pk}")
    if form.is_valid():
        form.save()
        messages.success(request, "Channel saved.")
    else:
        messages.error(request, " ".join(m for ms in form.errors.values() for m in ms))
    return redirect("notifications")


@login_required
@require_POST
def delete_channel(request, pk):
    own_channel(request, pk).delete()
    messages.success(request, "Channel removed.")
    return redirect("notifications")
