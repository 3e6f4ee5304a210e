// The week calendar: EventCalendar's resource time grid, one sub-column per GPU under each
// day. Times are wall-clock text in the user's zone (the server converts), so the script
// never does time-zone arithmetic itself.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("calendar-config").textContent);
  const element = document.getElementById("calendar");
  const urls = element.dataset;
  const csrf = (document.cookie.match(/(?:^|; )csrftoken=([^;]+)/) || [])[1] || "";

  // "2026-11-23T09:00:00" from a calendar Date: its UTC fields hold the wall clock.
  const wall = (date) => date.toISOString().slice(0, 19);
  const local = (text) => text.slice(0, 16); // for <input type=datetime-local>
  const withId = (template, id) => template.replace("/0/", "/" + id + "/");

  async function call(url, body) {
    const response = await fetch(url, {
      method: body === undefined ? "GET" : "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": decodeURIComponent(csrf) },
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = { detail: "The server did not answer with JSON." }; }
    if (!response.ok) throw new Error(data.detail || "Refused (" + response.status + ").");
    return data;
  }

  let pointerDown = null; // where a drag began: the columns between it and its end are ticked
  element.addEventListener("pointerdown", (e) => { pointerDown = { x: e.clientX, y: e.clientY }; }, true);

  const calendar = EventCalendar.create(element, {
    view: "resourceTimeGridWeek",
    datesAboveResources: true,
    timeZone: "UTC",
    date: config.date || undefined,
    firstDay: 1,
    resources: config.resources,
    selectable: true,
    nowIndicator: false,
    allDaySlot: false,
    slotDuration: "01:00",
    snapDuration: "00:30",
    height: "100%",
    headerToolbar: { start: "prev,next today", center: "title", end: "resourceTimeGridWeek,resourceTimeGridDay" },
    buttonText: { resourceTimeGridWeek: "week", resourceTimeGridDay: "day", today: "today" },
    eventSources: [{
      events: (info, success, failure) => {
        const query = new URLSearchParams({ start: wall(info.start), end: wall(info.end) });
        call(urls.events + "?" + query).then((data) => success(data.events), failure);
      },
    }],
    select: (info) => openBooking(info),
    eventClick: (info) => { if (info.event.extendedProps.reservation) openDetails(info.event.extendedProps.reservation); },
  });

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
      const label = document.createElement("label");
      const input = Object.assign(document.createElement("input"), { type: "checkbox", name: "devices", value: r.id, checked: ticked.includes(r.id) });
      label.append(input, " " + r.title);
      return label;
    }));
    bookForm.start.value = local(wall(info.start));
    bookForm.end.value = local(wall(info.end));
    bookError.textContent = "";
    bookDialog.showModal();
  }

  bookForm.addEventListener("submit", async (e) => {
    if (e.submitter && e.submitter.value !== "book") { calendar.unselect(); return; }
    e.preventDefault();
    const devices = [...bookForm.querySelectorAll("input[name=devices]:checked")].map((i) => Number(i.value));
    try {
      await call(urls.book, {
        title: bookForm.title.value, description: bookForm.description.value, devices,
        start: bookForm.start.value, end: bookForm.end.value,
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
    try { shown = await call(withId(urls.detail, id)); } catch (error) { alert(error.message); return; }
    document.getElementById("detail-title").textContent = shown.title;
    const facts = document.getElementById("detail-facts");
    facts.replaceChildren();
    fact(facts, "Owner", shown.owner);
    fact(facts, "Status", shown.status_text);
    fact(facts, "When", shown.start.replace("T", " ").slice(0, 16) + " – " + shown.end.replace("T", " ").slice(0, 16) + " (" + config.zone + ")");
    fact(facts, "GPUs", shown.devices.join(", "));
    fact(facts, "Description", shown.description);
    fact(facts, "Note", shown.note);
    fact(facts, shown.ongoing ? "Live usage" : "Usage", usageText(shown.usage));
    document.getElementById("detail-edit").hidden = !shown.may_change;
    document.getElementById("detail-save").hidden = !shown.may_change;
    document.getElementById("detail-cancel").hidden = !shown.may_change;
    if (shown.may_change) {
      detailForm.title.value = shown.title;
      detailForm.description.value = shown.description;
      detailForm.start.value = local(shown.start);
      detailForm.end.value = local(shown.end);
    }
    detailDialog.showModal();
  }

  detailForm.addEventListener("submit", async (e) => {
    const action = e.submitter && e.submitter.value;
    if (action !== "save" && action !== "cancel-booking") return;
    e.preventDefault();
    try {
      if (action === "save") {
        const changes = { title: detailForm.title.value, description: detailForm.description.value };
        // Only times that were changed are sent: a started booking may move its end only.
        if (detailForm.start.value !== local(shown.start)) changes.start = detailForm.start.value;
        if (detailForm.end.value !== local(shown.end)) changes.end = detailForm.end.value;
        await call(withId(urls.detail, shown.id), changes);
      } else {
        if (!confirm("Cancel '" + shown.title + "'?")) return;
        await call(withId(urls.cancel, shown.id), {});
      }
      detailDialog.close();
      calendar.refetchEvents();
    } catch (error) {
      detailError.textContent = error.message;
    }
  });
})();
