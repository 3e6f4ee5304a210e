/* Time as the reader reads it, for every page script: the one conversion between instants
 * (the API's ISO 8601 times, both ways) and the wall clock of the user's zone (their
 * profile's, else the site's), which the server writes on <html data-zone> as it writes the
 * pages' own times in it. The zone's rules, DST changes included, come from the browser's
 * Intl; the browser's own zone is never used, so a laptop set to another zone shows and
 * books the same hours as the pages. */
window.hiveTime = (function () {
  "use strict";
  const zone = document.documentElement.dataset.zone || "UTC";
  const DAY = 86400000; // ms
  const numeric = new Intl.DateTimeFormat("en-US", {
    timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  // As the server writes times (core/templatetags/hive_time.py): "Thu 26 Nov 14:05", and
  // "Thu 26 Nov 14:05 2027" when not in this year (of the user's zone).
  const readable = new Intl.DateTimeFormat("en-GB", {
    timeZone: zone, weekday: "short", day: "2-digit", month: "short", year: "numeric",
    hour: "2-digit", minute: "2-digit", hourCycle: "h23",
  });

  function parts(format, instant) {
    const p = {};
    format.formatToParts(new Date(instant)).forEach((part) => { p[part.type] = part.value; });
    return p;
  }

  /** "2027-03-28T09:00:00": the user's wall clock at an instant (a Date, epoch ms, or ISO
   * text with an offset). */
  function wall(instant) {
    const p = parts(numeric, instant);
    return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}`;
  }

  /** The instant, as ISO text in UTC, at which the user's wall clock reads ``text``
   * ("2027-03-28T09:00"): the inverse of wall(), for times sent to the API. A time the
   * clock skips (the spring change's hour) or shows twice (autumn's) is read with the
   * offset before the change, as Python reads it (zoneinfo, fold=0). */
  function instant(text) {
    const asUtc = Date.parse(text.slice(0, 19).padEnd(19, ":00") + "Z"); // the fields, as UTC
    if (Number.isNaN(asUtc)) throw new Error(`'${text}' is not a date and time.`);
    const wanted = new Date(asUtc).toISOString().slice(0, 19);
    const offset = (at) => Date.parse(wall(at) + "Z") - at; // the zone's offset at ``at``
    // The offsets a day before and a day after: a zone changes them months apart.
    const before = asUtc - offset(asUtc - DAY), after = asUtc - offset(asUtc + DAY);
    return new Date(wall(before) !== wanted && wall(after) === wanted ? after : before).toISOString();
  }

  /** "2027-03-28": the user's date today. */
  const today = () => wall(Date.now()).slice(0, 10);

  /** The day ``count`` days after "YYYY-MM-DD": calendar arithmetic, no zone involved. */
  function addDays(day, count) {
    const date = new Date(day + "T00:00:00Z");
    date.setUTCDate(date.getUTCDate() + count);
    return date.toISOString().slice(0, 10);
  }

  /** For libraries that print a Date's browser-local fields (uPlot's tzDate option): a Date
   * whose local fields read the user's wall clock at epoch ``seconds``. */
  function wallDate(seconds) {
    const [y, mo, d, h, mi, s] = wall(seconds * 1000).split(/[-T:]/).map(Number);
    return new Date(y, mo - 1, d, h, mi, s);
  }

  function absolute(iso) {
    const p = parts(readable, iso);
    const text = `${p.weekday} ${p.day} ${p.month} ${p.hour}:${p.minute}`;
    return p.year === today().slice(0, 4) ? text : `${text} ${p.year}`;
  }

  // A calendar date ("2027-03-28") in words; it names no instant, so no zone moves it.
  const dayShort = new Intl.DateTimeFormat("en-GB", { timeZone: "UTC", weekday: "short", day: "numeric", month: "short" });
  const dayLong = new Intl.DateTimeFormat("en-GB", { timeZone: "UTC", weekday: "long", day: "numeric", month: "long", year: "numeric" });
  function dateWords(day, long = false) {
    return (long ? dayLong : dayShort).format(new Date(day + "T00:00:00Z"));
  }

  function duration(minutes) {
    const d = Math.floor(minutes / 1440), h = Math.floor((minutes % 1440) / 60), m = minutes % 60;
    if (d) return h ? `${d} d ${h} h` : `${d} d`;
    if (h) return m ? `${h} h ${m} min` : `${h} h`;
    return `${m} min`;
  }

  /** "5 min ago", "in 2 h": no zone needed, only the distance from now. */
  function relative(iso) {
    const delta = Date.parse(iso) - Date.now();
    const minutes = Math.floor(Math.abs(delta) / 60000);
    if (minutes < 1) return "now";
    return delta > 0 ? `in ${duration(minutes)}` : `${duration(minutes)} ago`;
  }

  return {
    zone, wall, instant, today, addDays, wallDate, absolute, relative, dateWords,
    withRelative: (iso) => `${absolute(iso)} (${relative(iso)})`,
  };
})();
