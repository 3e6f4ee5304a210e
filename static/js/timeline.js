// The timeline: every GPU a row, grouped by host (a host's row folds its GPUs away), time
// across (a day or a week of the user's clock, each day as long as it really is). Only the
// rows in sight are in the page: 800 GPUs are a tall empty box with 30-odd rows drawn in it,
// redrawn as it scrolls. A drag across rows and hours books all the GPUs it crossed (a folded
// host's row: all its GPUs) in the booking dialog of js/bookings.js; "Book with a form" opens
// the same dialog without one.
// Data as the week grid's: /api/reservations/ and /api/access/ (js/api.js); every instant is
// turned into the user's wall clock by hiveTime (js/time.js) and back, nowhere else.
(function () {
  "use strict";
  const configNode = document.getElementById("timeline-config");
  if (!configNode) return; // the page shows an error instead
  const config = JSON.parse(configNode.textContent);
  const scroller = document.getElementById("timeline");
  const head = document.getElementById("tl-head");
  const body = document.getElementById("tl-body");
  const phone = window.matchMedia("(max-width: 767.98px)").matches;
  const ROW = 28; // px, a row's height (CSS .tl-row says the same)
  const LABEL = phone ? 112 : 176; // px, the names' column
  const SNAP = 30; // minutes: a drag books whole half hours
  const SPARE = 8; // rows drawn above and below those in sight, so a scroll shows no gap
  const HOUR = { day: phone ? 40 : 56, week: phone ? 8 : 14 }; // px an hour

  const hosts = new Map(); // host name -> its GPUs, in the server's order (host, index)
  for (const d of config.devices) {
    d.title = `${d.host}:${d.index}`;
    if (!hosts.has(d.host)) hosts.set(d.host, []);
    hosts.get(d.host).push(d);
  }
  // Hosts start unfolded when all GPUs fit in a screenful, folded beyond.
  // (The box is at most 72 % of the window high: CSS .tl.)
  const fits = (config.devices.length + hosts.size) * ROW <= window.innerHeight * 0.72;
  const state = {
    span: config.span, first: null, midnights: [], expanded: new Set(fits ? hosts.keys() : []),
    host: config.host, model: config.model, free: false,
    permitted: new Map(), bookings: [], byDevice: new Map(), loaded: false, rows: [], drawn: "",
  };

  // --- the axis: real minutes from the first shown midnight ---------------------------------
  // A day is as long as the user's clock makes it: 23 hours on the spring change, 25 on the
  // autumn one (whose doubled hour is drawn twice), so a booking is as wide as it lasts.
  const days = () => (state.span === "week" ? 7 : 1);
  const mondayOf = (day) => hiveTime.addDays(day, -((new Date(day + "T00:00:00Z").getUTCDay() + 6) % 7));
  const dayNumber = (day) => Date.parse(day + "T00:00:00Z") / 86400000;
  const px = () => HOUR[state.span] / 60; // px a minute
  const MINUTE = 60000;

  /** The instants (ms) of the shown days' midnights on the user's clock, and the next one. */
  function midnights() {
    return Array.from({ length: days() + 1 }, (_, i) => Date.parse(hiveTime.instant(hiveTime.addDays(state.first, i) + "T00:00")));
  }

  const total = () => (state.midnights[days()] - state.midnights[0]) / MINUTE;
  /** Minutes on the axis of an instant (ISO text or ms). */
  const minuteAt = (instant) => ((typeof instant === "number" ? instant : Date.parse(instant)) - state.midnights[0]) / MINUTE;
  /** Minutes on the axis of the user's wall-clock time "2027-03-28T09:30". */
  const minuteOfWall = (text) => minuteAt(hiveTime.instant(text));
  /** Wall-clock text of a minute on the axis (for the booking dialog). */
  const wallOf = (minute) => hiveTime.wall(state.midnights[0] + minute * MINUTE).slice(0, 16);

  const clamp = (minute) => Math.max(0, Math.min(total(), minute));
  const span = (startIso, endIso) => ({ from: clamp(minuteAt(startIso)), to: clamp(minuteAt(endIso)) });

  // --- data ---------------------------------------------------------------------------------
  async function load() {
    const query = { start: new Date(state.midnights[0]).toISOString(), end: new Date(state.midnights[days()]).toISOString() };
    if (config.narrowed) query.device = config.devices.map((d) => d.id).join(",");
    document.getElementById("tl-status").textContent = "loading…";
    scroller.setAttribute("aria-busy", "true");
    try {
      const [access, bookings] = await Promise.all([
        hiveApi.get("access/", query),
        hiveApi.all("reservations/", { ...query, page_size: 1000 }),
      ]);
      state.permitted = new Map(access.devices.map((d) => [String(d.id), d.covered.map((c) => span(c.start, c.end))]));
      state.bookings = bookings.filter((r) => r.status !== "cancelled").map((r) => ({
        id: r.id, devices: r.devices.map(String), ...span(r.start, r.end),
        text: `${r.owner}: ${r.title}`, mine: r.owner === config.user, status: r.status,
      }));
      state.byDevice = new Map();
      for (const b of state.bookings) {
        for (const id of b.devices) {
          if (!state.byDevice.has(id)) state.byDevice.set(id, []);
          state.byDevice.get(id).push(b);
        }
      }
      state.loaded = true;
      document.getElementById("tl-status").textContent = "";
    } catch (error) {
      document.getElementById("tl-status").textContent = error.message;
    }
    scroller.setAttribute("aria-busy", "false");
    refresh();
  }

  // --- which rows ---------------------------------------------------------------------------
  /** "Free for me": the user may book it some time shown and nobody has booked it then. */
  const freeForMe = (d) => (state.permitted.get(d.id) || []).length > 0 && !(state.byDevice.get(d.id) || []).length;

  function shownGpus(host) {
    return hosts.get(host).filter((d) => (!state.model || d.model === state.model) && (!state.free || !state.loaded || freeForMe(d)));
  }

  function buildRows() {
    const rows = [];
    const needle = state.host.trim().toLowerCase();
    for (const host of hosts.keys()) {
      if (needle && !host.toLowerCase().includes(needle)) continue;
      const gpus = shownGpus(host);
      if (!gpus.length) continue;
      rows.push({ host, gpus });
      if (state.expanded.has(host)) rows.push(...gpus.map((device) => ({ host, device })));
    }
    state.rows = rows;
  }

  // --- drawing ------------------------------------------------------------------------------
  const el = (tag, className, text) => Object.assign(document.createElement(tag), { className, textContent: text || "" });

  function drawHead() {
    const width = LABEL + total() * px();
    head.style.width = body.style.width = width + "px";
    scroller.style.setProperty("--hour", HOUR[state.span] + "px");
    scroller.style.setProperty("--label", LABEL + "px");
    const corner = el("div", "tl-corner", "GPU");
    const cells = [corner];
    const every = state.span === "day" ? 1 : 6;
    for (let i = 0; i < days(); i++) {
      const day = hiveTime.addDays(state.first, i);
      const [from, to] = [minuteAt(state.midnights[i]), minuteAt(state.midnights[i + 1])];
      const cell = el("div", "tl-day" + (day === hiveTime.today() ? " tl-today-head" : ""));
      cell.append(el("span", "tl-day-name", hiveTime.dateWords(day))); // stays in sight as it scrolls
      cell.style.left = LABEL + from * px() + "px";
      cell.style.width = (to - from) * px() + "px";
      cells.push(cell);
      // A tick at each whole hour the clock shows (twice "02" on the autumn change).
      for (let m = from + 60; m < to; m += 60) {
        const hour = wallOf(m).slice(11, 13);
        if (Number(hour) % every) continue;
        const tick = el("div", "tl-hour", hour);
        tick.style.left = LABEL + m * px() + "px";
        cells.push(tick);
      }
    }
    head.replaceChildren(...cells);
    const last = hiveTime.addDays(state.first, days() - 1);
    document.getElementById("tl-title").textContent = days() === 1 ? hiveTime.dateWords(state.first, true)
      : `${hiveTime.dateWords(state.first)} – ${hiveTime.dateWords(last, true)}`;
    document.querySelectorAll("[data-span]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.span === state.span)));
  }

  function bar(booking) {
    const button = el("button", `tl-bar ${booking.mine ? "mine" : "others"} ${booking.status}`, booking.text);
    button.type = "button";
    button.title = booking.text;
    button.dataset.reservation = booking.id;
    button.style.left = booking.from * px() + "px";
    button.style.width = Math.max(4, (booking.to - booking.from) * px()) + "px";
    return button;
  }

  function shade(range) {
    const s = el("span", "tl-ok");
    s.style.left = range.from * px() + "px";
    s.style.width = (range.to - range.from) * px() + "px";
    return s;
  }

  function drawRow(row, index) {
    const line = el("div", row.device ? "tl-row" : "tl-row tl-host-row");
    line.style.top = index * ROW + "px";
    const label = el("div", "tl-label");
    const lane = el("div", "tl-lane");
    if (row.device) {
      label.textContent = row.device.title;
      label.title = row.device.model;
      (state.permitted.get(row.device.id) || []).forEach((r) => lane.append(shade(r)));
      (state.byDevice.get(row.device.id) || []).forEach((b) => lane.append(bar(b)));
    } else {
      const open = state.expanded.has(row.host);
      const toggle = el("button", "tl-toggle", `${open ? "▾" : "▸"} ${row.host} · ${row.gpus.length} GPU${row.gpus.length === 1 ? "" : "s"}`);
      Object.assign(toggle, { type: "button", title: [...new Set(row.gpus.map((d) => d.model))].join(", ") });
      toggle.setAttribute("aria-expanded", String(open));
      toggle.dataset.host = row.host;
      label.append(toggle);
      if (!open) { // a folded host shows its GPUs' bookings, each once
        const seen = new Set();
        row.gpus.forEach((d) => (state.byDevice.get(d.id) || []).forEach((b) => { if (!seen.has(b.id)) { seen.add(b.id); lane.append(bar(b)); } }));
      }
    }
    line.append(label, lane);
    return line;
  }

  /** Draws the rows in sight (and SPARE either side); nothing if the same ones are drawn. */
  function draw(force) {
    const top = scroller.scrollTop - head.offsetHeight;
    const first = Math.max(0, Math.floor(top / ROW) - SPARE);
    const last = Math.min(state.rows.length, Math.ceil((top + scroller.clientHeight) / ROW) + SPARE);
    const key = `${first}:${last}`;
    if (!force && key === state.drawn) return;
    state.drawn = key;
    const lines = [];
    for (let i = first; i < last; i++) lines.push(drawRow(state.rows[i], i));
    const today = dayNumber(hiveTime.today()) - dayNumber(state.first);
    if (today >= 0 && today < days()) {
      const mark = el("div", "tl-today");
      const [from, to] = [minuteAt(state.midnights[today]), minuteAt(state.midnights[today + 1])];
      mark.style.left = LABEL + from * px() + "px";
      mark.style.width = (to - from) * px() + "px";
      lines.unshift(mark);
    }
    body.replaceChildren(...lines, selection);
    body.style.height = Math.max(state.rows.length * ROW, ROW) + "px";
    if (!state.rows.length) body.append(el("p", "tl-empty text-body-secondary", "No GPUs match the filters."));
  }

  function refresh() {
    buildRows();
    drawHead();
    draw(true);
  }

  let pending = false;
  scroller.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(false); });
  });

  // --- a drag across rows and hours ---------------------------------------------------------
  const selection = el("div", "tl-selection");
  selection.hidden = true;
  let dragFrom = null;

  function pointAt(e) {
    const box = body.getBoundingClientRect();
    const row = Math.max(0, Math.min(state.rows.length - 1, Math.floor((e.clientY - box.top) / ROW)));
    return { row, minute: clamp((e.clientX - box.left - LABEL) / px()) };
  }

  function chosen(a, b) {
    const [top, bottom] = [Math.min(a.row, b.row), Math.max(a.row, b.row)];
    let from = Math.floor(Math.min(a.minute, b.minute) / SNAP) * SNAP;
    let to = Math.ceil(Math.max(a.minute, b.minute) / SNAP) * SNAP;
    if (to <= from) to = Math.min(total(), from + SNAP);
    if (to <= from) from = to - SNAP;
    return { top, bottom, from, to };
  }

  function showSelection(pick) {
    Object.assign(selection.style, {
      top: pick.top * ROW + "px", height: (pick.bottom - pick.top + 1) * ROW + "px",
      left: LABEL + pick.from * px() + "px", width: (pick.to - pick.from) * px() + "px",
    });
    selection.hidden = false;
  }

  body.addEventListener("pointerdown", (e) => {
    if (e.button !== 0 || e.target.closest("button") || !state.rows.length) return;
    if (e.clientX - body.getBoundingClientRect().left < LABEL) return; // the names' column
    e.preventDefault();
    body.setPointerCapture(e.pointerId);
    dragFrom = pointAt(e);
    showSelection(chosen(dragFrom, dragFrom));
  });
  body.addEventListener("pointermove", (e) => { if (dragFrom) showSelection(chosen(dragFrom, pointAt(e))); });
  body.addEventListener("pointercancel", () => { dragFrom = null; selection.hidden = true; });
  body.addEventListener("pointerup", (e) => {
    if (!dragFrom) return;
    const pick = chosen(dragFrom, pointAt(e));
    dragFrom = null;
    const rows = state.rows.slice(pick.top, pick.bottom + 1);
    // A GPU's row gives that GPU; a folded host's row all its GPUs shown.
    const ticked = rows.flatMap((r) => (r.device ? [r.device] : state.expanded.has(r.host) ? [] : r.gpus));
    const choices = [...new Set(rows.map((r) => r.host))].flatMap(shownGpus);
    dialogs.book(choices.map(({ id, title }) => ({ id, title })), ticked.map((d) => d.id), wallOf(pick.from), wallOf(pick.to));
  });

  body.addEventListener("click", (e) => {
    const toggle = e.target.closest(".tl-toggle");
    const booking = e.target.closest(".tl-bar");
    if (toggle) {
      const host = toggle.dataset.host;
      if (!state.expanded.delete(host)) state.expanded.add(host);
      buildRows();
      draw(true);
      body.querySelector(`.tl-toggle[data-host="${CSS.escape(host)}"]`)?.focus();
    } else if (booking) {
      dialogs.details(booking.dataset.reservation);
    }
  });

  const dialogs = hiveBookings({ changed: load, closed: () => { selection.hidden = true; } });
  const bookForm = document.getElementById("book-form");

  // Booking without a drag (keyboards, phones): the GPUs the filters show, none ticked yet,
  // tomorrow 09:00-17:00 to start.
  document.getElementById("book-form-button").addEventListener("click", () => {
    const day = hiveTime.addDays(hiveTime.today(), 1);
    const choices = state.rows.filter((r) => !r.device).flatMap((r) => r.gpus);
    dialogs.book(choices.map(({ id, title }) => ({ id, title })), [], day + "T09:00:00", day + "T17:00:00");
    bookForm.title.focus();
  });

  // --- filters, span, moving ----------------------------------------------------------------
  const filters = document.getElementById("tl-filters");
  filters.host.value = state.host;
  filters.model.value = state.model;
  filters.addEventListener("submit", (e) => e.preventDefault());
  filters.addEventListener("input", () => {
    Object.assign(state, { host: filters.host.value, model: filters.model.value, free: filters.free.checked });
    scroller.scrollTop = 0;
    refresh();
  });
  document.getElementById("tl-expand").addEventListener("click", () => { state.expanded = new Set(hosts.keys()); refresh(); });
  document.getElementById("tl-collapse").addEventListener("click", () => { state.expanded.clear(); refresh(); });

  function go(day) {
    state.first = state.span === "week" ? mondayOf(day) : day;
    state.midnights = midnights();
    load();
    drawHead();
    draw(true); // the rows at once; their bookings when the API answers
    // The working day in sight: today's 07:00 if shown, else the first day's.
    const today = dayNumber(hiveTime.today()) - dayNumber(state.first);
    const shownDay = today >= 0 && today < days() ? today : 0;
    scroller.scrollLeft = minuteOfWall(hiveTime.addDays(state.first, shownDay) + "T07:00") * px();
  }
  document.querySelectorAll("[data-span]").forEach((b) => b.addEventListener("click", () => {
    const today = hiveTime.today();
    const inSpan = dayNumber(today) - dayNumber(state.first);
    state.span = b.dataset.span;
    go(inSpan >= 0 && inSpan < 7 ? today : state.first);
  }));
  document.querySelectorAll("[data-move]").forEach((b) => b.addEventListener("click", () => {
    const step = Number(b.dataset.move);
    go(step ? hiveTime.addDays(state.first, step * days()) : hiveTime.today());
  }));

  config.narrowed = new URLSearchParams(location.search).has("devices");
  buildRows();
  go(config.date || hiveTime.today());
})();
