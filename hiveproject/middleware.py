"""Requests never reach a host: SSH and local commands belong to the workers.

While a request is served, ``monitoring.transport`` refuses to run a command (it raises
``HostCallInRequest``), so a view that would wait on a host fails in the tests that visit
it instead of holding a web thread for as long as a host takes to answer.
"""

from monitoring.transport import serving_request


class NoHostCalls:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = serving_request.set(request.path)
        try:
            return self.get_response(request)
        finally:
            serving_request.reset(token)
