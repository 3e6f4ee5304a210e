/* The site's time charts (uPlot), for the host page's live charts (js/dashboard.js) and
 * history (js/history.js): one look and one set of axes for both.
 * - The time axis covers the span asked for (the history's range; for live charts at least
 *   the last LIVE_SPAN), so a chart with one point reads "14:05", not "May 2027 – May 2029"
 *   as uPlot's own range around a single time would.
 * - Values are written short ("80k", not "80,000", which the axis clipped) and the axis is
 *   as wide as its widest label.
 * - Axis, grid and text take the page's colours, so they read in dark mode too. */
window.hiveChart = (function () {
  "use strict";
  const LIVE_SPAN = 600; // s: the shortest time a live chart spans
  const short = new Intl.NumberFormat("en-GB", { notation: "compact", maximumFractionDigits: 1 });
  const CHAR = 8; // px per character of an axis label (12 px system font), with room
  // The time axis in the site's one format ("Sat 28 Nov", "14:05"), 24-hour, never uPlot's
  // US default ("4:30am 11/28/26"): uPlot's table of [tick step, label, then the label at a
  // new year, month, day, hour, minute, second, mode].
  const DAY_LABEL = "\n{WWW} {DD} {MMM}";
  const TIME_LABELS = [
    [86400, "{WWW} {DD} {MMM}", "\n{YYYY}", null, null, null, null, null, 1],
    [3600, "{HH}:{mm}", DAY_LABEL, null, DAY_LABEL, null, null, null, 1],
    [60, "{HH}:{mm}", DAY_LABEL, null, DAY_LABEL, null, null, null, 1],
    [1, "{HH}:{mm}:{ss}", DAY_LABEL, null, DAY_LABEL, null, "\n{HH}:{mm}", null, 1],
  ];

  function ink() {
    const style = getComputedStyle(document.body);
    return {
      text: style.getPropertyValue("--bs-body-color").trim() || "#212529",
      grid: style.getPropertyValue("--bs-border-color-translucent").trim() || "rgba(0,0,0,.15)",
    };
  }

  const valueAxisSize = (u, values) =>
    values ? 20 + CHAR * Math.max(1, ...values.map((v) => String(v).length)) : 40;

  /** [from, to] in epoch seconds: ``span`` when given, else the points' own span, widened
   * back from the last point to LIVE_SPAN. */
  function timeRange(times, span) {
    if (span) return span;
    const last = times.length ? times[times.length - 1] : Date.now() / 1000;
    return [Math.min(times.length ? times[0] : last, last - LIVE_SPAN), last];
  }

  /** A chart in ``holder``: ``lines`` are [{label, stroke}], ``data`` uPlot's [times, ...];
   * ``span`` fixes the time axis ([from, to] seconds), else it follows the data. The plot is
   * kept on holder.plot (for the page's tests and the console). */
  function draw(holder, title, lines, data, span) {
    const colours = ink();
    const axis = { stroke: colours.text, grid: { stroke: colours.grid }, ticks: { stroke: colours.grid } };
    const plot = new uPlot({
      title: title, width: 360, height: 160,
      tzDate: window.hiveTime.wallDate, // the time axis in the reader's zone
      scales: { x: { time: true, range: (u) => timeRange(u.data[0], span) } },
      axes: [
        Object.assign({}, axis, { values: TIME_LABELS }),
        Object.assign({}, axis, {
          size: valueAxisSize,
          values: (u, splits) => splits.map((v) => short.format(v)),
        }),
      ],
      series: [{}].concat(lines),
    }, data, holder);
    holder.plot = plot;
    return plot;
  }

  return { draw, timeRange };
})();
