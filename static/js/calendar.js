// The week calendar: EventCalendar's resource time grid, one sub-column per GPU under each
// day. Its data is the public API's (js/api.js): the bookings from /api/reservations/ and
// where the user may book from /api/access/, both in ISO instants. The calendar runs in its
// "UTC" mode, where it shows wall-clock text as it is and a selection's startStr is the text
// of the slot chosen, whatever the browser's own zone; hiveTime (js/time.js) turns the
// instants into the user's wall clock and back, so a week across a DST change is right.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("calendar-config").textContent);
  const element = document.getElementById("calendar");
  const shownIds = config.resources.map((r) => r.id);

  const local = (text) => text.slice(0, 16); // for <input type=datetime-local>
  const wallInput = (iso) => local(hiveTime.wall(iso));
  const at = (text) => (text ? hiveTime.instant(text) : null); // empty: the API says so

  // The week's data: where the user may book (shading), then the bookings (boxes).
  async function weekEvents(info) {
    if (!shownIds.length) return [];
    const query = { start: at(info.startStr), end: at(info.endStr), device: shownIds.join(",") };
    const [access, bookings] = await Promise.all([
      hiveApi.get("access/", query),
      // At most API_MAX_PAGE_SIZE a page; hiveApi.all follows the rest.
      hiveApi.all("reservations/", { ...query, page_size: 1000 }),
    ]);
    return [...access.devices.flatMap(shading), ...bookings.map(box)];
  }

  function shading(device) {
    return device.covered.map((span) => ({
      start: hiveTime.wall(span.start),
      end: hiveTime.wall(span.end),
      resourceIds: [String(device.id)],
      display: "background",
      classNames: ["permitted"],
    }));
  }

  // One box per booking, spread over the columns of its GPUs that are shown.
  function box(reservation) {
    return {
      id: String(reservation.id),
      resourceIds: reservation.devices.map(String).filter((id) => shownIds.includes(id)),
      start: hiveTime.wall(reservation.start),
      end: hiveTime.wall(reservation.end),
      title: `${reservation.owner}: ${reservation.title}`,
      classNames: ["booking", reservation.owner === config.user ? "mine" : "others", reservation.status],
      extendedProps: { reservation: reservation.id },
    };
  }

  let pointerDown = null; // where a drag began: the columns between it and its end are ticked
  element.addEventListener("pointerdown", (e) => { pointerDown = { x: e.clientX, y: e.clientY }; }, true);

  // One host shown: its name is in the page's heading and a column says only its GPU index.
  const oneHost = new Set(config.resources.map((r) => r.title.split(":")[0])).size === 1;
  const phone = window.matchMedia("(max-width: 767.98px)").matches;

  // The index is shown; the host's name stays in the text, at size zero (not Bootstrap's
  // visually-hidden, which would break the line), as the head's aria-label is its text.
  function shortLabel(resource) {
    const host = Object.assign(document.createElement("span"), {
      className: "hive-unseen-prefix", textContent: resource.title.split(":")[0] + ":",
    });
    return { domNodes: [host, document.createTextNode(String(resource.extendedProps.index))] };
  }

  const calendar = EventCalendar.create(element, {
    view: phone ? "resourceTimeGridDay" : "resourceTimeGridWeek",
    scrollTime: "07:00:00", // the working day in sight; every hour stays a scroll away
    resourceLabelContent: (arg) => (oneHost ? shortLabel(arg.resource) : arg.resource.title),
    datesAboveResources: true,
    timeZone: "UTC",
    date: config.date || hiveTime.today(),
    firstDay: 1,
    resources: config.resources,
    selectable: true,
    nowIndicator: false,
    allDaySlot: false,
    slotDuration: "01:00",
    snapDuration: "00:30",
    height: "100%",
    // The calendar's own "today" is the browser's date; the user's is a highlighted date,
    // dressed as today, and the today button goes to it.
    highlightedDates: [hiveTime.today()], // kept current below
    theme: (theme) => Object.assign({}, theme, { today: "", highlight: theme.today }),
    customButtons: { userToday: { text: "today", click: () => calendar.setOption("date", hiveTime.today()) } },
    headerToolbar: { start: "prev,next userToday", center: "title", end: "resourceTimeGridWeek,resourceTimeGridDay" },
    buttonText: { resourceTimeGridWeek: "week", resourceTimeGridDay: "day", prev: "previous", next: "next" },
    eventSources: [{ events: (info, success, failure) => { weekEvents(info).then(success, failure); } }],
    select: (info) => openBooking(info),
    eventClick: (info) => { if (info.event.extendedProps.reservation) openDetails(info.event.extendedProps.reservation); },
  });

  // A page left open overnight moves its today mark at the user's midnight.
  let markedToday = hiveTime.today();
  setInterval(() => {
    if (markedToday === hiveTime.today()) return;
    markedToday = hiveTime.today();
    calendar.setOption("highlightedDates", [markedToday]);
  }, 60000);

  function resourcesBetween(first, last) {
    const ids = config.resources.map((r) => r.id);
    let [a, b] = [ids.indexOf(first), ids.indexOf(last)];
    if (a < 0 || b < 0) return [first];
    if (a > b) [a, b] = [b, a];
    return ids.slice(a, b + 1);
  }

  // --- booking ----------------------------------------------------------------------------
  const bookDialog = document.getElementById("book-dialog");
  const bookForm = document.getElementById("book-form");
  const bookError = document.getElementById("book-error");

  function openBooking(info) {
    const first = pointerDown && calendar.dateFromPoint(pointerDown.x, pointerDown.y);
    const endPoint = info.jsEvent && calendar.dateFromPoint(info.jsEvent.clientX, info.jsEvent.clientY);
    const last = endPoint && endPoint.resource ? endPoint.resource.id : info.resource.id;
    const ticked = resourcesBetween(first && first.resource ? first.resource.id : info.resource.id, last);
    const box = document.getElementById("book-gpus");
    box.replaceChildren(...config.resources.map((r) => {
      const label = Object.assign(document.createElement("label"), { className: "form-check form-check-inline" });
      const input = Object.assign(document.createElement("input"), {
        type: "checkbox", name: "devices", value: r.id, checked: ticked.includes(r.id), className: "form-check-input",
      });
      label.append(input, " " + r.title);
      return label;
    }));
    bookForm.start.value = local(info.startStr);
    bookForm.end.value = local(info.endStr);
    bookError.textContent = "";
    bookDialog.showModal();
  }

  // Booking without a drag (keyboards, phones): the same dialog, tomorrow 09:00-17:00 to start.
  document.getElementById("book-form-button").addEventListener("click", () => {
    const day = hiveTime.addDays(hiveTime.today(), 1);
    pointerDown = null;
    openBooking({ startStr: day + "T09:00:00", endStr: day + "T17:00:00", resource: { id: null } });
    bookForm.title.focus();
  });

  // "Close" is a plain button, so Enter in a field books (or saves) rather than closes.
  document.querySelectorAll(".hive-dialog [data-close]").forEach((button) => {
    button.addEventListener("click", () => { button.closest("dialog").close(); });
  });
  bookDialog.addEventListener("close", () => calendar.unselect());

  bookForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const devices = [...bookForm.querySelectorAll("input[name=devices]:checked")].map((i) => Number(i.value));
    try {
      await hiveApi.post("reservations/", {
        title: bookForm.title.value, description: bookForm.description.value, devices,
        start: at(bookForm.start.value), end: at(bookForm.end.value),
      });
      bookDialog.close();
      bookForm.reset();
      calendar.unselect();
      calendar.refetchEvents();
    } catch (error) {
      bookError.textContent = error.message;
    }
  });

  // --- details, edit, cancel --------------------------------------------------------------
  const detailDialog = document.getElementById("detail-dialog");
  const detailForm = document.getElementById("detail-form");
  const detailError = document.getElementById("detail-error");
  let shown = null;

  function fact(list, name, value) {
    if (value === null || value === undefined || value === "") return;
    list.append(Object.assign(document.createElement("dt"), { textContent: name }),
      Object.assign(document.createElement("dd"), { textContent: value }));
  }

  function usageText(usage) {
    if (!usage) return "";
    const parts = [
      usage.utilization === null ? "no samples yet" : "GPU " + usage.utilization + " %",
      usage.memory_mib === null ? "" : "memory " + usage.memory_mib + " MiB",
      "idle " + usage.idle_minutes + " GPU-min",
    ];
    return parts.filter(Boolean).join(", ") + (usage.final ? "" : " (so far)");
  }

  async function openDetails(id) {
    detailError.textContent = "";
    try { shown = await hiveApi.get(`reservations/${id}/`); } catch (error) { alert(error.message); return; }
    document.getElementById("detail-title").textContent = shown.title;
    const facts = document.getElementById("detail-facts");
    const when = (iso) => wallInput(iso).replace("T", " ");
    const now = Date.now();
    const ongoing = shown.status !== "cancelled" && Date.parse(shown.start) <= now && now < Date.parse(shown.end);
    facts.replaceChildren();
    fact(facts, "Owner", shown.owner);
    fact(facts, "Status", shown.status_display);
    fact(facts, "When", `${when(shown.start)} – ${when(shown.end)} (${hiveTime.zone})`);
    fact(facts, "GPUs", shown.device_names.join(", "));
    fact(facts, "Description", shown.description);
    fact(facts, "Note", shown.note);
    fact(facts, ongoing ? "Live usage" : "Usage", usageText(shown.usage));
    document.getElementById("detail-edit").hidden = !shown.may_change;
    document.getElementById("detail-save").hidden = !shown.may_change;
    document.getElementById("detail-cancel").hidden = !shown.may_change;
    if (shown.may_change) {
      detailForm.title.value = shown.title;
      detailForm.description.value = shown.description;
      detailForm.start.value = wallInput(shown.start);
      detailForm.end.value = wallInput(shown.end);
    }
    detailDialog.showModal();
  }

  detailForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const action = e.submitter ? e.submitter.value : "save";
    if (action !== "save" && action !== "cancel-booking") return;
    try {
      if (action === "save") {
        const changes = { title: detailForm.title.value, description: detailForm.description.value };
        // Only times that were changed are sent: a started booking may move its end only.
        if (detailForm.start.value !== wallInput(shown.start)) changes.start = at(detailForm.start.value);
        if (detailForm.end.value !== wallInput(shown.end)) changes.end = at(detailForm.end.value);
        await hiveApi.patch(`reservations/${shown.id}/`, changes);
      } else {
        if (!confirm("Cancel '" + shown.title + "'?")) return;
        await hiveApi.delete(`reservations/${shown.id}/`);
      }
      detailDialog.close();
      calendar.refetchEvents();
    } catch (error) {
      detailError.textContent = error.message;
    }
  });
})();
