/* GPU history charts: the chosen GPU over the last hour, day or week, from the history API.
 * Used by the dashboard and the host page; both have a #history section with a GPU and a
 * range select. The API root comes from the section (the site may live under a sub-path).
 */
(function () {
  "use strict";
  const section = document.getElementById("history");
  if (!section) return;
  const API_ROOT = section.dataset.apiRoot;
  const FIELDS = [
    ["utilization_gpu", "GPU utilisation %", "#1f77b4"],
    ["memory_used_mib", "GPU memory used MiB", "#d62728"],
    ["temperature_c", "GPU temperature °C", "#2ca02c"],
    ["power_w", "GPU power W", "#ff7f0e"],
  ];
  const deviceSelect = document.getElementById("history-device");
  const rangeSelect = document.getElementById("history-range");
  const message = document.getElementById("history-message");
  const box = document.getElementById("history-chart");
  let plots = [];

  function draw(body) {
    plots.forEach((p) => p.destroy());
    plots = [];
    box.textContent = "";
    const times = body.samples.map((s) => Date.parse(s.time) / 1000);
    message.textContent = body.samples.length + " points (" + body.resolution + "), times in " +
      window.hiveTime.zone;
    FIELDS.forEach(([field, title, colour]) => {
      const holder = document.createElement("div");
      holder.className = "chart";
      holder.dataset.field = field;
      box.appendChild(holder);
      const values = body.samples.map((s) => s[field]);
      plots.push(new uPlot({
        title: title, width: 360, height: 160,
        tzDate: window.hiveTime.wallDate, // the time axis in the reader's zone
        series: [{}, { label: title, stroke: colour }],
      }, [times, values], holder));
    });
  }

  function show() {
    const device = deviceSelect.value;
    if (!device) { message.textContent = "No GPU known yet."; return; }
    const hours = Number(rangeSelect.value);
    const since = new Date(Date.now() - hours * 3600 * 1000).toISOString();
    const url = API_ROOT + "devices/" + device + "/history/?since=" + encodeURIComponent(since);
    fetch(url, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then(draw)
      .catch(() => { message.textContent = "Could not load the history."; });
  }

  deviceSelect.addEventListener("change", show);
  rangeSelect.addEventListener("change", show);
  show();
})();
