"""Talking to the GPU Hive API, with every failure turned into a sentence for people."""

import httpx

TIMEOUT = httpx.Timeout(15.0, connect=5.0)
# Lists are read whole, so in the fewest answers: each one costs the server about as much
# as a page of a few hundred rows. It caps the size at its own API_MAX_PAGE_SIZE.
LIST_PAGE_SIZE = 1000


class HiveError(Exception):
    """Something the user should read; the message says what happened and what to do."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status, when the server answered


class Api:
    def __init__(self, url: str, token: str = "", transport=None):
        if not url:
            raise HiveError("No server yet: run `hive login URL` first (or set HIVE_URL).")
        self.url = normalise_url(url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers["Accept"] = "application/json"
        self.http = httpx.Client(headers=headers, timeout=TIMEOUT, transport=transport)
        self.has_token = bool(token)

    def get(self, path: str, **params):
        """The answer; a list answered in pages is read to its end (the Link headers)."""
        query = {"page_size": LIST_PAGE_SIZE} | {k: v for k, v in params.items() if v}
        response = self._send("GET", path, params=query)
        body = self.answer(response)
        while isinstance(body, list) and "next" in response.links:
            response = self._send_url("GET", response.links["next"]["url"])
            body += self.answer(response)
        return body

    def post(self, path: str, body: dict):
        return self.request("POST", path, json=body)

    def delete(self, path: str):
        return self.request("DELETE", path)

    def request(self, method: str, path: str, **kwargs):
        return self.answer(self._send(method, path, **kwargs))

    def check_server(self) -> None:
        """Fail before asking for a password when the URL is not a GPU Hive server."""
        response = self._send("GET", "")
        if not isinstance(_json(response), dict):
            raise HiveError(_not_hive(self.url, response))

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        return self._send_url(method, f"{self.url}/api/{path.lstrip('/')}", **kwargs)

    def _send_url(self, method: str, url: str, **kwargs) -> httpx.Response:
        try:
            return self.http.request(method, url, **kwargs)
        except httpx.TimeoutException:
            raise HiveError(f"{self.url} did not answer in time; try again later.") from None
        except httpx.HTTPError as exc:
            raise HiveError(f"Cannot reach {self.url} ({exc}). Is the URL right?") from None

    def answer(self, response: httpx.Response):
        body = _json(response)
        if response.is_success:
            return body
        if body is None or not isinstance(body, dict):
            raise HiveError(_not_hive(self.url, response))
        raise HiveError(explain(response.status_code, body, self.has_token), response.status_code)


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise HiveError(f"{url!r} is not a web address: write it with http:// or https://.")
    return url.removesuffix("/api")


def _json(response: httpx.Response):
    if response.status_code == 204:
        return {}
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _not_hive(url: str, response: httpx.Response) -> str:
    if response.status_code >= 500:
        return f"The server failed (HTTP {response.status_code}); try again, or tell an admin."
    return (
        f"{url} does not look like a GPU Hive server (HTTP {response.status_code} without the "
        "API's answer). Check the URL: it is the address of the web pages."
    )


TOKEN_WORDS = ("token", "credentials were not provided")


def explain(status: int, body: dict, has_token: bool) -> str:
    """The server's own message (`detail`), with what to do about it."""
    detail = str(body.get("detail") or body)
    if status in (401, 403) and any(word in detail.lower() for word in TOKEN_WORDS):
        hint = "run `hive login URL` again" if has_token else "run `hive login URL` first"
        return f"Not signed in: {detail} ({hint})."
    if status in (401, 403):
        return f"Not allowed: {detail}"
    if status == 404:
        return f"Not found: {detail}"
    if status == 400:
        return f"Refused: {detail}"
    if status == 429:
        return f"Slow down: {detail}"
    return f"HTTP {status}: {detail}"
