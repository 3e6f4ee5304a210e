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
    eventClick: (info) => { if (info.event.extendedProps.reservation) dialogs.details(info.event.extendedProps.reservation); },
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

  // --- booking: the dialogs are js/bookings.js's -------------------------------------------
  const dialogs = hiveBookings({
    changed: () => { calendar.unselect(); calendar.refetchEvents(); },
    closed: () => calendar.unselect(),
  });
  const bookForm = document.getElementById("book-form");

  function openBooking(info) {
    const first = pointerDown && calendar.dateFromPoint(pointerDown.x, pointerDown.y);
    const endPoint = info.jsEvent && calendar.dateFromPoint(info.jsEvent.clientX, info.jsEvent.clientY);
    const last = endPoint && endPoint.resource ? endPoint.resource.id : info.resource.id;
    const ticked = resourcesBetween(first && first.resource ? first.resource.id : info.resource.id, last);
    dialogs.book(config.resources, ticked, info.startStr, info.endStr);
  }

  // Booking without a drag (keyboards, phones): the same dialog, tomorrow 09:00-17:00 to start.
  document.getElementById("book-form-button").addEventListener("click", () => {
    const day = hiveTime.addDays(hiveTime.today(), 1);
    pointerDown = null;
    openBooking({ startStr: day + "T09:00:00", endStr: day + "T17:00:00", resource: { id: null } });
    bookForm.title.focus();
  });
})();
