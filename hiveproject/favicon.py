"""/favicon.ico: browsers ask for it on pages that name no icon (the admin, the browsable API)."""

from django.templatetags.static import static
from django.views.generic import RedirectView


class FaviconView(RedirectView):
    """To the site's SVG icon, which base.html links. Not permanent: a browser keeps a
    permanent redirect for ever, and the icon's address moves with STATIC_URL."""

    permanent = False

    def get_redirect_url(self, *args, **kwargs):
        return static("img/hive.svg")
