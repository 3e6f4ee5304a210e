/* The pages' scripts speak to the public API under /api/, like every other client: the same
 * objects, the same errors ({"detail": ...} with each refused field) and ISO 8601 instants
 * (static/js/time.js turns them into the user's wall clock and back). Requests go with the
 * page's session; DRF's SessionAuthentication then asks writes for the CSRF token in the
 * X-CSRFToken header, taken from the page's own forms (the cookie may be HttpOnly). */
window.hiveApi = (function () {
  "use strict";
  const root = document.documentElement.dataset.apiRoot || "/api/"; // the site may live under a sub-path

  function csrfToken() {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  /** The data of a JSON answer; a refusal throws an Error carrying the API's ``detail``. */
  async function answer(response) {
    if (response.status === 204) return null;
    let data;
    try { data = await response.json(); } catch (e) { data = { detail: "The server did not answer with JSON." }; }
    if (!response.ok) throw new Error(data.detail || `Refused (${response.status}).`);
    return data;
  }

  /** ``path`` under /api/ ("reservations/3/"), with a query from an object. */
  function url(path, query) {
    const search = query ? "?" + new URLSearchParams(query) : "";
    return root + path + search;
  }

  function request(method, path, { query, body } = {}) {
    const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") options.headers["X-CSRFToken"] = csrfToken();
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(url(path, query), options);
  }

  /** Every object of a list, following its pages (the Link header's rel="next"). */
  async function all(path, query) {
    const objects = [];
    let next = url(path, query);
    while (next) {
      const response = await fetch(next, { credentials: "same-origin", headers: { Accept: "application/json" } });
      objects.push(...(await answer(response)));
      const link = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get("Link") || "");
      // Its path only: behind a proxy the absolute link may name another scheme or host.
      next = link ? ((u) => u.pathname + u.search)(new URL(link[1], location.href)) : null;
    }
    return objects;
  }

  /** The GPUs not free for the reader (/api/device-states/), by id, each with the sentence a
   * tile shows: "reserved by ada until Thu 26 Nov 14:00", as board/states.py's state_text
   * writes it, in the user's zone. */
  async function deviceStates() {
    const states = new Map();
    for (const s of await request("GET", "device-states/").then(answer)) {
      const text = s.until ? `${s.text} until ${hiveTime.absolute(s.until)}` : s.text;
      states.set(s.device, { state: s.state, text, mine: s.mine });
    }
    return states;
  }

  return {
    all,
    deviceStates,
    get: (path, query) => request("GET", path, { query }).then(answer),
    post: (path, body) => request("POST", path, { body }).then(answer),
    put: (path, body) => request("PUT", path, { body }).then(answer),
    patch: (path, body) => request("PATCH", path, { body }).then(answer),
    delete: (path) => request("DELETE", path).then(answer),
  };
})();
