/* On every page: a table wider than the screen scrolls inside itself (hive.css); make it
 * reachable by keyboard, so its hidden columns can be scrolled to without a mouse. */
(function () {
  "use strict";
  function markWide() {
    document.querySelectorAll(".hive-main .table").forEach((table) => {
      if (table.scrollWidth > table.clientWidth + 1) table.tabIndex = 0;
      else table.removeAttribute("tabindex");
    });
  }
  markWide();
  window.addEventListener("resize", markWide);
})();

/* Times written by scripts read as the server writes them (board/templatetags/hive_time.py):
 * "Thu 26 Nov 14:05 (5 min ago)", in the reader's zone (a script tag's data-zone). */
window.hiveTime = (function () {
  "use strict";
  const formats = new Map();
  function absolute(iso, zone) {
    if (!formats.has(zone)) {
      formats.set(zone, new Intl.DateTimeFormat("en-GB", {
        timeZone: zone || undefined, weekday: "short", day: "2-digit", month: "short",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23",
      }));
    }
    const p = {};
    formats.get(zone).formatToParts(new Date(iso)).forEach((part) => { p[part.type] = part.value; });
    return `${p.weekday} ${p.day} ${p.month} ${p.hour}:${p.minute}`;
  }
  function duration(minutes) {
    const d = Math.floor(minutes / 1440), h = Math.floor((minutes % 1440) / 60), m = minutes % 60;
    if (d) return h ? `${d} d ${h} h` : `${d} d`;
    if (h) return m ? `${h} h ${m} min` : `${h} h`;
    return `${m} min`;
  }
  function relative(iso) {
    const delta = Date.parse(iso) - Date.now();
    const minutes = Math.floor(Math.abs(delta) / 60000);
    if (minutes < 1) return "now";
    return delta > 0 ? `in ${duration(minutes)}` : `${duration(minutes)} ago`;
  }
  return { absolute, relative, withRelative: (iso, zone) => `${absolute(iso, zone)} (${relative(iso)})` };
})();
