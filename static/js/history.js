/* GPU history charts: the chosen GPU over the last hour, day or week, from the history API
 * (/api/devices/<id>/history/). Used by the host page's #history section, with a GPU and a
 * range select.
 */
(function () {
  "use strict";
  const section = document.getElementById("history");
  if (!section) return;
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
    hiveApi.get(`devices/${device}/history/`, { since })
      .then(draw)
      .catch(() => { message.textContent = "Could not load the history."; });
  }

  deviceSelect.addEventListener("change", show);
  rangeSelect.addEventListener("change", show);
  show();
})();
