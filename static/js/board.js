/* The GPU board: tiles kept current from the monitoring websocket, touching only what
 * changed; booking states refreshed from board/states.json; the filter, kept in the URL.
 * Everything that came from a host (user names, errors) is set as text, never HTML. */
(function () {
  "use strict";
  const WS_PATH = document.currentScript.dataset.wsPath;
  const board = document.getElementById("board");
  const tiles = new Map(); // device id -> {el, figs, users, state, util, mem, shown: {}}
  board.querySelectorAll(".gpu-tile").forEach((el) => {
    const state = el.querySelector(".gt-state").textContent;
    tiles.set(Number(el.id.slice(4)), {
      booking: el.dataset.state === "free" ? "free" : state,
      el: el, shown: { users: el.querySelector(".gt-users").textContent, state: state }, figs: el.querySelector(".gt-figs"), users: el.querySelector(".gt-users"),
      state: el.querySelector(".gt-state"), util: el.querySelector(".gt-util"), mem: el.querySelector(".gt-mem"),
    });
  });
  const STATE_CLASSES = ["gt-free", "gt-closed", "gt-busy", "gt-mine", "gt-reserved", "gt-job", "gt-down"];

  const dash = (v) => (v === null || v === undefined ? "–" : v);
  // Whole GiB from 10 up: the figures line fits a narrow tile.
  const gib = (mib) => (mib === null || mib === undefined ? "–" : mib >= 10240 ? String(Math.round(mib / 1024)) : (mib / 1024).toFixed(1));
  const pct = (part, whole) => (part === null || part === undefined || !whole ? 0 : Math.min(100, Math.round(100 * part / whole)));

  function set(tile, key, value, apply) {
    if (tile.shown[key] === value) return;
    tile.shown[key] = value;
    apply(value);
  }

  function stateClass(el, up, users) {
    if (!up || el.dataset.lost) return "gt-down";
    const state = el.dataset.state;
    if (el.dataset.mine) return "gt-mine";
    // "closed": free, but no grant lets this viewer start on it (the server decides).
    if (state === "free" || state === "closed") return users ? "gt-busy" : "gt-" + state;
    return state === "job" || state === "queue" ? "gt-job" : "gt-reserved";
  }

  const TEXT = { "gt-free": "free", "gt-busy": "in use, not booked" };

  function paint(tile, up, users) {
    const el = tile.el;
    const free = up && !el.dataset.lost && el.dataset.state === "free" && !users;
    if (free) el.dataset.free = "1"; else delete el.dataset.free;
    const cls = stateClass(el, up, users);
    set(tile, "class", cls, () => {
      el.classList.remove(...STATE_CLASSES);
      el.classList.add(cls);
    });
    const text = cls === "gt-down" ? (el.dataset.lost ? "GPU lost" : "host down") : TEXT[cls] || tile.booking;
    set(tile, "state", text, (t) => { tile.state.textContent = t; });
  }

  function updateGpu(tile, gpu, users, up) {
    const memory = gib(gpu.memory_used_mib) + "/" + gib(gpu.memory_total_mib) + " GiB";
    // A MIG slice: its memory alone (nvidia-smi gives no more of it), as tiles.py writes it.
    set(tile, "figs", !up ? "no data: host down" : tile.el.dataset.slice ? memory : dash(gpu.utilization_gpu) + " % · " + memory +
      " · " + dash(gpu.temperature_c) + " °C · " + (gpu.power_w === null || gpu.power_w === undefined ? "–" : Math.round(gpu.power_w)) + " W",
    (t) => { tile.figs.textContent = t; });
    set(tile, "util", up ? pct(gpu.utilization_gpu, 100) : 0, (w) => { tile.util.style.width = w + "%"; });
    set(tile, "mem", up ? pct(gpu.memory_used_mib, gpu.memory_total_mib) : 0, (w) => { tile.mem.style.width = w + "%"; });
    set(tile, "users", users || "no processes", (t) => { tile.users.textContent = t; });
    paint(tile, up, users);
  }

  function usersByGpu(processes) {
    const out = {};
    processes.forEach((p) => {
      (out[p.gpu_uuid] = out[p.gpu_uuid] || new Set()).add(p.user || "unknown owner");
    });
    Object.keys(out).forEach((k) => { out[k] = [...out[k]].sort().join(", "); });
    return out;
  }

  function updateHost(host) {
    const section = document.getElementById("host-" + host.id);
    if (!section) return false;
    section.classList.toggle("board-host-down", !host.up);
    const users = host.up ? usersByGpu(host.processes) : {};
    host.gpus.concat(host.slices || []).forEach((gpu) => {
      const tile = tiles.get(gpu.device_id);
      if (tile) updateGpu(tile, gpu, users[gpu.uuid] || "", host.up);
    });
    if (!host.up) section.querySelectorAll(".gpu-tile").forEach((el) => {
      const tile = tiles.get(Number(el.id.slice(4)));
      updateGpu(tile, {}, "", false);
    });
    return true;
  }

  function onSnapshot(message) {
    const t0 = performance.now();
    const { hosts, removed } = window.hiveLive.merge(message);
    let unknown = removed.length > 0;
    hosts.forEach((host) => { if (!updateHost(host)) unknown = true; });
    if (unknown) document.getElementById("board-added").hidden = false; // hosts came or went
    summarise();
    applyFilter();
    window.hiveBoardUpdateMs = performance.now() - t0; // read by bench/web_pages.py
  }

  function summarise() {
    let free = 0;
    tiles.forEach((tile) => { if (tile.el.dataset.free) free += 1; });
    const strong = document.querySelector("#board-summary strong");
    const text = free + " of " + tiles.size + " GPU" + (tiles.size === 1 ? "" : "s") + " free";
    if (strong.textContent !== text) strong.textContent = text;
  }

  // --- booking states ---------------------------------------------------------------------
  function refreshStates() {
    fetch(board.dataset.statesUrl, { credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : Promise.reject(response.status)))
      .then((data) => {
        tiles.forEach((tile, id) => {
          const booking = data.gpus[id] || { state: "free", text: "free", mine: false };
          tile.el.dataset.state = booking.state;
          if (booking.mine) tile.el.dataset.mine = "1"; else delete tile.el.dataset.mine;
          tile.booking = booking.text;
          paint(tile, !tile.el.closest(".board-host-down"), tile.shown.users === "no processes" ? "" : tile.shown.users);
        });
        summarise();
        applyFilter();
      })
      .catch(() => {}); // the next round tries again; the tiles keep their last state
  }

  // --- filter -----------------------------------------------------------------------------
  const filter = document.getElementById("board-filter");

  function applyFilter() {
    const host = filter.host.value, model = filter.model.value;
    const free = filter.free.checked, mine = filter.mine.checked;
    let shown = 0;
    board.querySelectorAll(".board-host").forEach((section) => {
      let any = false;
      const hostMatch = !host || section.dataset.host === host;
      section.querySelectorAll(".gpu-tile").forEach((el) => {
        const show = hostMatch && (!model || el.dataset.model === model) &&
          (!free || el.dataset.free === "1") && (!mine || el.dataset.mine === "1");
        if (el.hidden === show) el.hidden = !show;
        if (show) { any = true; shown += 1; }
      });
      const hide = !any && !(hostMatch && !model && !free && !mine);
      if (section.hidden !== hide) section.hidden = hide;
    });
    const filtered = host || model || free || mine;
    document.getElementById("filter-count").textContent = filtered ? shown + " shown" : "";
  }

  function readUrl() {
    const query = new URLSearchParams(window.location.search);
    filter.host.value = query.get("host") || "";
    filter.model.value = query.get("model") || "";
    filter.free.checked = query.get("free") === "1";
    filter.mine.checked = query.get("mine") === "1";
  }

  filter.addEventListener("change", () => {
    const query = new URLSearchParams();
    ["host", "model"].forEach((name) => { if (filter[name].value) query.set(name, filter[name].value); });
    ["free", "mine"].forEach((name) => { if (filter[name].checked) query.set(name, "1"); });
    const search = query.toString();
    window.history.replaceState(null, "", search ? "?" + search : window.location.pathname);
    applyFilter();
  });
  filter.addEventListener("submit", (event) => event.preventDefault());

  // --- websocket --------------------------------------------------------------------------
  function connect(delay) {
    const state = document.getElementById("live-state");
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + window.location.host + WS_PATH);
    socket.onopen = () => { state.textContent = "live"; state.className = "badge text-bg-success"; delay = 1000; };
    socket.onmessage = (event) => onSnapshot(JSON.parse(event.data));
    socket.onclose = (event) => {
      state.className = "badge text-bg-warning";
      if (event.code === 4401) { state.textContent = "signed out: reload the page to sign in"; return; }
      state.textContent = "connection lost, retrying…";
      setTimeout(() => connect(Math.min(delay * 2, 30000)), delay);
    };
  }

  readUrl();
  applyFilter();
  connect(1000);
  setInterval(refreshStates, 60000);
})();
