/* The booking dialogs that the week grid (js/calendar.js) and the timeline (js/timeline.js)
 * share: book several GPUs at once (POST /api/reservations/), a booking's details, its edit
 * and its cancel. Times in the fields are the user's wall clock (hiveTime); the API gets
 * instants. ``changed`` is called after a booking was made, changed or cancelled;
 * ``closed`` when the booking dialog closes (the week grid drops its selection then). */
window.hiveBookings = function (callbacks) {
  "use strict";
  const { changed, closed = () => {} } = callbacks;
  const local = (text) => text.slice(0, 16); // for <input type=datetime-local>
  const wallInput = (iso) => local(hiveTime.wall(iso));
  const at = (text) => (text ? hiveTime.instant(text) : null); // empty: the API says so

  const bookDialog = document.getElementById("book-dialog");
  const bookForm = document.getElementById("book-form");
  const bookError = document.getElementById("book-error");

  /** Opens the booking dialog: ``choices`` [{id, title}] as check boxes, those in ``ticked``
   * ticked, from ``start`` to ``end`` (wall-clock text, "2027-03-28T09:00:00"). */
  function book(choices, ticked, start, end) {
    const box = document.getElementById("book-gpus");
    box.replaceChildren(...choices.map((r) => {
      const label = Object.assign(document.createElement("label"), { className: "form-check form-check-inline" });
      const input = Object.assign(document.createElement("input"), {
        type: "checkbox", name: "devices", value: r.id, checked: ticked.includes(r.id), className: "form-check-input",
      });
      label.append(input, " " + r.title);
      return label;
    }));
    bookForm.start.value = local(start);
    bookForm.end.value = local(end);
    bookError.textContent = "";
    bookDialog.showModal();
  }

  // "Close" is a plain button, so Enter in a field books (or saves) rather than closes.
  document.querySelectorAll(".hive-dialog [data-close]").forEach((button) => {
    button.addEventListener("click", () => { button.closest("dialog").close(); });
  });
  bookDialog.addEventListener("close", closed);

  // What an action did, said where the server's messages stand (templates/_messages.html),
  // and the page's own lists of bookings (marked data-refresh) read again from the server.
  const status = document.getElementById("booking-status");
  function say(text) {
    status.textContent = text;
    status.hidden = false;
  }
  async function refreshLists() {
    const marked = [...document.querySelectorAll("[data-refresh][id]")];
    if (!marked.length) return;
    const page = await fetch(location.href, { credentials: "same-origin" });
    if (!page.ok) return;
    const fresh = new DOMParser().parseFromString(await page.text(), "text/html");
    marked.forEach((old) => {
      const now = fresh.getElementById(old.id);
      if (now) old.replaceChildren(...now.childNodes);
    });
  }
  function after(text) {
    say(text);
    changed();
    refreshLists();
  }
  const count = (n) => (n === 1 ? "1 GPU" : `${n} GPUs`);

  bookForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const devices = [...bookForm.querySelectorAll("input[name=devices]:checked")].map((i) => Number(i.value));
    try {
      const made = await hiveApi.post("reservations/", {
        title: bookForm.title.value, description: bookForm.description.value, devices,
        start: at(bookForm.start.value), end: at(bookForm.end.value),
      });
      bookDialog.close();
      bookForm.reset();
      const waiting = made.status === "pending" ? ", awaiting an admin's approval" : "";
      after(`Booked '${made.title}': ${count(devices.length)}, ${hiveTime.absolute(made.start)} – ${hiveTime.absolute(made.end)}${waiting}.`);
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

  async function details(id) {
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
        detailDialog.close();
        after(`Saved '${detailForm.title.value}'.`);
      } else {
        if (!window.confirm("Cancel '" + shown.title + "'?")) return;
        await hiveApi.delete(`reservations/${shown.id}/`);
        detailDialog.close();
        after(`Cancelled '${shown.title}'.`);
      }
    } catch (error) {
      detailError.textContent = error.message;
    }
  });

  return { book, details };
};
