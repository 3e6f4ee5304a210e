/* A host's live card (on its page): kept current from the websocket, with rolling charts
 * drawn by uPlot in the user's saved layout (history.js draws GPU history).
 * Everything that came from a host (commands, user names, errors) is set as text, never HTML.
 */
(function () {
  "use strict";
  const script = document.currentScript;
  const WS_PATH = script.dataset.wsPath;
  const CHARTS = JSON.parse(document.getElementById("dashboard-charts").textContent);
  let layout = JSON.parse(document.getElementById("dashboard-layout").textContent);
  const KEEP = 300; // points per live chart
  const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const GPU_FIELD = {
    gpu_utilization: "utilization_gpu",
    gpu_memory: "memory_used_mib",
    gpu_temperature: "temperature_c",
    gpu_power: "power_w",
  };
  const series = {}; // host id -> {times: [], lastProbe, charts: {chart: {label: [values]}}}
  const plots = {}; // "host:chart" -> uPlot

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function dash(value) {
    return value === null || value === undefined ? "–" : value;
  }

  function valuesFor(host, chart) {
    if (chart in GPU_FIELD) {
      const out = {};
      host.gpus.forEach((g) => { out["GPU " + g.index] = g[GPU_FIELD[chart]]; });
      return out;
    }
    if (chart === "cpu") return { CPU: host.cpu.utilization };
    return { RAM: host.cpu.memory_used_mib };
  }

  function record(host) {
    if (!host.up || !host.last_probe_at) return;
    const s = (series[host.id] = series[host.id] || { times: [], charts: {} });
    if (s.lastProbe === host.last_probe_at) return;
    s.lastProbe = host.last_probe_at;
    s.times.push(Date.parse(host.last_probe_at) / 1000);
    Object.keys(CHARTS).forEach((chart) => {
      const values = valuesFor(host, chart);
      const lines = (s.charts[chart] = s.charts[chart] || {});
      Object.keys(values).forEach((label) => {
        if (!lines[label]) lines[label] = new Array(s.times.length - 1).fill(null);
      });
      Object.keys(lines).forEach((label) => {
        lines[label].push(label in values ? values[label] : null);
        if (lines[label].length > KEEP) lines[label].shift();
      });
    });
    if (s.times.length > KEEP) s.times.shift();
  }

  function drawCharts(hostId) {
    const section = document.getElementById("host-" + hostId);
    const s = series[hostId];
    if (!section || !s) return;
    const box = section.querySelector(".charts");
    layout.charts.forEach((chart) => {
      const lines = s.charts[chart] || {};
      const labels = Object.keys(lines);
      const data = [s.times].concat(labels.map((l) => lines[l]));
      const key = hostId + ":" + chart;
      const plot = plots[key];
      if (plot && plot.series.length === labels.length + 1) {
        plot.setData(data);
        return;
      }
      if (plot) plot.destroy();
      const holder = el("div", null, "chart");
      holder.dataset.chart = chart;
      box.appendChild(holder);
      plots[key] = new uPlot({
        title: CHARTS[chart],
        width: 360,
        height: 160,
        tzDate: window.hiveTime.wallDate, // the time axis in the reader's zone
        series: [{}].concat(labels.map((l, i) => ({ label: l, stroke: COLOURS[i % COLOURS.length] }))),
      }, data, holder);
    });
  }

  function resetCharts() {
    Object.keys(plots).forEach((key) => { plots[key].destroy(); delete plots[key]; });
    document.querySelectorAll(".charts").forEach((box) => { box.textContent = ""; });
  }

  function stateText(host) {
    let text = host.status_display;
    if (host.last_seen) text += " · last seen " + window.hiveTime.withRelative(host.last_seen);
    else if (!host.up) text += " · never seen";
    return text;
  }

  function gpuRows(host) {
    const rows = [];
    if (host.up) {
      host.gpus.forEach((g) => rows.push([g.index, g.name, dash(g.utilization_gpu),
        dash(g.memory_used_mib) + " / " + dash(g.memory_total_mib), dash(g.temperature_c), dash(g.power_w)]));
      if (!host.gpus.length) rows.push(["No GPUs."]);
    }
    return rows;
  }

  function fillTable(tbody, rows, columns) {
    tbody.textContent = "";
    rows.forEach((cells) => {
      const tr = el("tr");
      cells.forEach((cell) => tr.appendChild(el("td", cell)));
      if (cells.length === 1) tr.firstChild.colSpan = columns;
      tbody.appendChild(tr);
    });
  }

  function gib(mib) {
    return mib === null || mib === undefined ? "–" : (mib / 1024).toFixed(1);
  }

  function diskText(disks) {
    return (disks || []).map((d) => "Disk " + d.path + " " + gib(d.used_mib) + " / " +
      gib(d.total_mib) + " GiB").join(" · ");
  }

  function updateCard(host) {
    const section = document.getElementById("host-" + host.id);
    if (!section) return false;
    section.className = "host status-" + host.status;
    section.querySelector(".state").textContent = stateText(host);
    section.querySelector(".error").textContent = host.last_error;
    const cpu = host.cpu || {};
    section.querySelector(".cpu").textContent = "CPU " + dash(cpu.utilization) + "% · RAM " +
      dash(cpu.memory_used_mib) + " / " + dash(cpu.memory_total_mib) + " MiB";
    section.querySelector(".disks").textContent = host.up ? diskText(host.disks) : "";
    const gpus = section.querySelector(".gpus tbody");
    fillTable(gpus, gpuRows(host), 6);
    host.lost_gpus.forEach((g) => {
      const tr = el("tr", null, "lost");
      tr.appendChild(el("td", g.index));
      tr.appendChild(el("td", g.name));
      const note = el("td", "GPU lost: not seen since " + window.hiveTime.withRelative(g.last_seen), "error");
      note.colSpan = 4;
      tr.appendChild(note);
      gpus.appendChild(tr);
    });
    const procs = host.up ? host.processes.map((p) => [p.gpu_uuid.slice(0, 16), p.pid === null ? "?" : p.pid,
      p.owner_text, dash(p.memory_mib), p.command]) : [];
    fillTable(section.querySelector(".processes tbody"), procs.length ? procs : [["None."]], 5);
    return true;
  }

  function onSnapshot(message) {
    window.hiveLive.merge(message).hosts.forEach((host) => {
      record(host);
      if (updateCard(host)) drawCharts(host.id); // only this page's host has a card
    });
  }

  function connect(delay) {
    const state = document.getElementById("live-state");
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + window.location.host + WS_PATH);
    socket.onopen = () => { state.textContent = "live"; delay = 1000; };
    socket.onmessage = (event) => onSnapshot(JSON.parse(event.data));
    socket.onclose = (event) => {
      if (event.code === 4401) { state.textContent = "signed out: reload the page to sign in"; return; }
      state.textContent = "connection lost, retrying…";
      setTimeout(() => connect(Math.min(delay * 2, 30000)), delay);
    };
  }

  function readControls() {
    const charts = [];
    document.querySelectorAll("#chart-choices li").forEach((li) => {
      if (li.querySelector("input").checked) charts.push(li.dataset.chart);
    });
    return { charts: charts, hidden_hosts: layout.hidden_hosts };
  }

  function saveLayout() {
    const wanted = readControls();
    const message = document.getElementById("layout-message");
    hiveApi.put("dashboard/layout/", wanted).then((body) => {
      layout = body;
      message.textContent = "Saved.";
      resetCharts();
      document.querySelectorAll("section.host[data-host]").forEach((section) => {
        drawCharts(Number(section.dataset.host));
      });
    }).catch((error) => { message.textContent = `Could not save the layout: ${error.message}`; });
  }

  function setUpControls() {
    const list = document.getElementById("chart-choices");
    layout.charts.slice().reverse().forEach((chart) => {
      const li = list.querySelector('li[data-chart="' + chart + '"]');
      if (li) { li.querySelector("input").checked = true; list.prepend(li); }
    });
    list.addEventListener("click", (event) => {
      const li = event.target.closest("li");
      if (event.target.classList.contains("up") && li.previousElementSibling) li.previousElementSibling.before(li);
      else if (event.target.classList.contains("down") && li.nextElementSibling) li.nextElementSibling.after(li);
      else return;
      saveLayout();
    });
    document.getElementById("layout-controls").addEventListener("change", saveLayout);
  }

  setUpControls();
  connect(1000);
})();
