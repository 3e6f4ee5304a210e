"""JSON answers written by orjson: the same bytes as DRF's JSONRenderer, several times faster.

DRF's renderer goes through the standard library's encoder in Python for every value; orjson
writes the whole answer in C. Values orjson does not know (datetimes, decimals, lazy
translations) go through DRF's own encoder, so they look as they always did. An indented
answer (asked for by the browsable API) and anything orjson refuses (integers beyond 64 bits)
are left to DRF's renderer.
"""

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

# DRF's renderer writes non-ASCII as is (UNICODE_JSON) and keys that are not strings as
# strings; orjson does both with this option. Datetimes go to DRF's encoder ("Z" for UTC).
OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


class FastJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if self.get_indent(accepted_media_type or "", renderer_context or {}):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            rendered = orjson.dumps(data, default=JSONEncoder().default, option=OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        # As DRF does: these two are valid JSON but end a line in JavaScript.
        if b"\xe2\x80\xa8" in rendered or b"\xe2\x80\xa9" in rendered:
            rendered = rendered.replace(b"\xe2\x80\xa8", b"\\u2028")
            rendered = rendered.replace(b"\xe2\x80\xa9", b"\\u2029")
        return rendered
