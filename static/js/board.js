/* The GPU board, as tiles or dense (one line per host, a cell per GPU): kept current from the
 * monitoring websocket's board rows (monitoring.live.board_entry), touching only what
 * changed; booking states refreshed from the API (/api/device-states/); the filter and the
 * hosts' order, kept in the URL; on the dense board, Enter or a click on a cell opens its
 * detail row. Everything that came from a host (user names, errors) is set as text, never HTML. */
(function () {
  "use strict";
  const WS_PATH = document.currentScript.dataset.wsPath;
  const WS_QUERY = document.currentScript.dataset.wsQuery || "";
  const board = document.getElementById("board");
  const DENSE = board.classList.contains("board-dense");
  const CELLS = DENSE ? ".dc" : ".gpu-tile";
  // device id -> {el, booking, shown: {}, parts: {figs, users, state}} (parts: dense cells' label)
  const tiles = new Map();
  board.querySelectorAll(CELLS).forEach((el) => {
    const tile = { el: el, shown: {} };
    if (DENSE) {
      // The label board_format.cell_label wrote: "host:i model · figures · users · state[ · INTRUDER: x]".
      const parts = el.getAttribute("aria-label").split(" · ");
      const k = el.dataset.intruder ? 1 : 0;
      const lead = parts[1] === "MIG" ? 2 : 1; // a GPU in MIG mode: its model reads "H100 · MIG"
      tile.parts = { name: parts.slice(0, lead).join(" · "), figs: parts.slice(lead, -2 - k).join(" · "), users: parts.at(-2 - k), state: parts.at(-1 - k) };
      tile.shown = { users: tile.parts.users, state: tile.parts.state };
      tile.name = el.textContent.replace(/[!×]$/, ""); // the cell's text: its name and glyph
    } else {
      tile.figs = el.querySelector(".gt-figs"); tile.users = el.querySelector(".gt-users"); tile.state = el.querySelector(".gt-state");
      tile.util = el.querySelector(".gt-util"); tile.mem = el.querySelector(".gt-mem");
      tile.shown = { users: tile.users.textContent, state: tile.state.textContent };
    }
    tile.booking = el.dataset.state === "free" ? "free" : tile.shown.state;
    tile.shown.intruder = el.dataset.intruder || "";
    tiles.set(Number(el.id.slice(4)), tile);
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

  // A tile's text line, or a dense cell's label part (the cell's label is rewritten whole).
  function setText(tile, key, text) {
    set(tile, key, text, (t) => {
      if (!DENSE) { tile[key].textContent = t; return; }
      tile.parts[key] = t;
      writeLabel(tile);
    });
  }

  // A dense cell's label, as board_format.cell_label writes it.
  function writeLabel(tile) {
    const p = tile.parts;
    const intruder = tile.el.dataset.intruder ? " · INTRUDER: " + tile.el.dataset.intruder : "";
    tile.el.setAttribute("aria-label", [p.name, p.figs, p.users, p.state].join(" · ") + intruder);
    if (tile.detail) tile.detail.textContent = tile.el.getAttribute("aria-label");
  }

  // Who intrudes on the GPU now ("" for nobody): its mark, glyph and words, as the page's
  // load drew them (board_format: the cell's "!" and ring, the tile's "intruder:" line).
  function setIntruder(tile, names) {
    set(tile, "intruder", names, (who) => {
      const el = tile.el;
      if (who) el.dataset.intruder = who; else delete el.dataset.intruder;
      if (DENSE) {
        el.classList.toggle("dc-intruder", Boolean(who));
        el.textContent = tile.name + (who ? "!" : el.dataset.lost ? "×" : "");
        writeLabel(tile);
        return;
      }
      el.querySelector(".gt-intruder")?.remove();
      if (!who) return;
      const line = document.createElement("p");
      const mark = document.createElement("span");
      line.className = "gt-intruder";
      mark.setAttribute("aria-hidden", "true");
      mark.textContent = "! ";
      line.append(mark, "intruder: " + who);
      el.append(line);
    });
  }

  function setBar(tile, key, width) {
    set(tile, key, width, (w) => {
      if (DENSE) tile.el.style.setProperty(key === "util" ? "--u" : "--m", w);
      else tile[key].style.width = w + "%";
    });
  }

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
    setText(tile, "state", text);
  }

  // gpu: a board row (monitoring.live.BOARD_GPU_FIELDS), or null when the host is down.
  function updateGpu(tile, gpu, users, up) {
    const total = Number(tile.el.dataset.total) || null;
    const [, util, used, temp, power] = gpu || [];
    if (!tile.el.dataset.lost) {
      const memory = gib(used) + "/" + gib(total) + " GiB";
      // A MIG slice: its memory alone (nvidia-smi gives no more of it), as tiles.py writes it.
      const figs = tile.el.dataset.slice ? memory : dash(util) + " % · " + memory + " · " + dash(temp) + " °C · " + dash(power) + " W";
      setText(tile, "figs", up ? figs : "no data: host down");
    }
    setBar(tile, "util", up ? pct(util, 100) : 0);
    setBar(tile, "mem", up ? pct(used, total) : 0);
    setText(tile, "users", users || "no processes");
    paint(tile, up, users);
  }

  function updateHost(host) {
    const row = document.getElementById("host-" + host.id);
    if (!row) return false;
    row.classList.toggle("board-host-down", !host.up);
    host.gpus.forEach((gpu) => {
      const tile = tiles.get(gpu[0]);
      if (tile) updateGpu(tile, gpu, host.users[gpu[0]] || "", host.up);
    });
    // Every GPU of the host, up or down: an intruder's mark goes when its violation ends.
    const intruders = host.intruders || {};
    row.querySelectorAll(CELLS).forEach((el) => setIntruder(tiles.get(Number(el.id.slice(4))), intruders[el.id.slice(4)] || ""));
    if (!host.up) row.querySelectorAll(CELLS).forEach((el) => updateGpu(tiles.get(Number(el.id.slice(4))), null, "", false));
    if (DENSE) countFree(row);
    return true;
  }

  function countFree(row) {
    const cells = row.querySelectorAll(".dc");
    const free = [...cells].filter((el) => el.dataset.free).length;
    const text = free + "/" + cells.length;
    const td = row.querySelector(".dh-free");
    if (td.textContent !== text) td.textContent = text;
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
    hiveApi.deviceStates()
      .then((states) => {
        tiles.forEach((tile, id) => {
          const booking = states.get(id) || { state: "free", text: "free", mine: false };
          tile.el.dataset.state = booking.state;
          if (booking.mine) tile.el.dataset.mine = "1"; else delete tile.el.dataset.mine;
          tile.booking = booking.text;
          paint(tile, !tile.el.closest(".board-host-down"), tile.shown.users === "no processes" ? "" : tile.shown.users);
        });
        if (DENSE) board.querySelectorAll(".board-host").forEach(countFree);
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
      section.querySelectorAll(CELLS).forEach((el) => {
        const show = hostMatch && (!model || el.dataset.model === model) &&
          (!free || el.dataset.free === "1") && (!mine || el.dataset.mine === "1");
        if (el.hidden === show) el.hidden = !show;
        if (show) { any = true; shown += 1; }
      });
      const hide = !any && !(hostMatch && !model && !free && !mine);
      if (section.hidden !== hide) section.hidden = hide;
      const detail = section.nextElementSibling;
      if (detail && detail.classList.contains("dense-detail") && hide) closeDetail();
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
    if (filter.sort) filter.sort.value = query.get("sort") || "";
  }

  // --- the dense board's order and detail row ---------------------------------------------
  // A host's sort key: trouble (intruders, lost GPUs, down) first, most free, busiest.
  const SORTS = {
    trouble: (row) => -(row.querySelectorAll(".dc-intruder").length * 100 + row.querySelectorAll(".dc-lost").length * 10 +
      (row.classList.contains("board-host-down") ? 1 : 0)),
    free: (row) => -row.querySelectorAll(".dc[data-free]").length,
    busy: (row) => -[...row.querySelectorAll(".dc")].reduce((sum, el) => sum + Number(el.style.getPropertyValue("--u") || 0), 0),
  };

  function sortHosts(initial) {
    if (!DENSE || (initial && !filter.sort.value)) return; // rendered by name
    closeDetail();
    const key = SORTS[filter.sort.value];
    const rows = [...board.tBodies[0].querySelectorAll(".board-host")];
    const keyed = rows.map((row) => [key ? key(row) : 0, row.dataset.host, row]);
    keyed.sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1]));
    keyed.forEach(([, , row]) => board.tBodies[0].appendChild(row));
  }

  let open = null; // the cell whose detail row is open

  function closeDetail() {
    if (!open) return;
    open.el.setAttribute("aria-expanded", "false");
    open.detail.closest("tr").remove();
    open.detail = null;
    open = null;
  }

  function toggleDetail(el) {
    const tile = tiles.get(Number(el.id.slice(4)));
    const was = open;
    closeDetail();
    if (was === tile) { el.focus(); return; }
    const row = el.closest("tr");
    const tr = document.createElement("tr");
    tr.className = "dense-detail";
    const td = document.createElement("td");
    td.colSpan = 4;
    td.id = "detail-" + el.id;
    const text = document.createElement("span");
    text.textContent = el.getAttribute("aria-label");
    const link = document.createElement("a");
    link.href = row.querySelector("th a").href + "#gpu-" + el.dataset.index;
    link.textContent = "host page";
    td.append(text, " · ", link);
    tr.appendChild(td);
    row.after(tr);
    el.setAttribute("aria-controls", td.id);
    el.setAttribute("aria-expanded", "true");
    tile.detail = text;
    open = tile;
  }

  if (DENSE) {
    board.querySelectorAll(".dc").forEach((el) => el.setAttribute("aria-expanded", "false"));
    // A button: Enter, Space and a click all come here.
    board.addEventListener("click", (event) => {
      const el = event.target.closest(".dc");
      if (el) toggleDetail(el);
    });
    board.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && open) { const el = open.el; closeDetail(); el.focus(); }
    });
  }

  filter.addEventListener("change", () => {
    const query = new URLSearchParams();
    ["host", "model", "sort"].forEach((name) => { if (filter[name] && filter[name].value) query.set(name, filter[name].value); });
    const layout = new URLSearchParams(window.location.search).get("layout");
    if (layout) query.set("layout", layout);
    ["free", "mine"].forEach((name) => { if (filter[name].checked) query.set(name, "1"); });
    const search = query.toString();
    window.history.replaceState(null, "", search ? "?" + search : window.location.pathname);
    sortHosts();
    applyFilter();
  });
  filter.addEventListener("submit", (event) => event.preventDefault());

  // --- websocket --------------------------------------------------------------------------
  function connect(delay) {
    const state = document.getElementById("live-state");
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + window.location.host + WS_PATH + "?" + WS_QUERY);
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
  sortHosts(true);
  applyFilter();
  connect(1000);
  setInterval(refreshStates, 60000);
})();
