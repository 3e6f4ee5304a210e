/* The grid form: GPUs of the chosen host only, their booking states kept fresh from the board's
 * states.json, and a live preview of the tasks the form makes, answered by the server (the code
 * that creates them), never expanded here. */
(function () {
  "use strict";
  const form = document.getElementById("grid-form");
  if (!form) return;
  const host = form.elements.host;
  const picker = document.getElementById("gpu-picker");

  function showHostGpus() {
    for (const group of picker.querySelectorAll(".gpu-pick-host")) {
      const shown = !host.value || group.dataset.host === host.value;
      group.hidden = !shown;
      if (!shown) group.querySelectorAll("input").forEach((box) => { box.checked = false; });
    }
  }
  host.addEventListener("change", showHostGpus);
  // Ticking a GPU before choosing a host chooses its host (a task runs on one host).
  picker.addEventListener("change", (event) => {
    const group = event.target.closest(".gpu-pick-host");
    if (event.target.checked && group && host.value !== group.dataset.host) {
      host.value = group.dataset.host;
      showHostGpus();
    }
  });
  showHostGpus();

  function refreshStates() {
    if (document.hidden) return;
    fetch(form.dataset.statesUrl, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((body) => {
        if (!body) return;
        for (const tile of picker.querySelectorAll(".gpu-pick")) {
          const state = tile.querySelector(".gt-state");
          const booked = body.gpus[tile.dataset.gpu];
          state.textContent = booked ? booked.text : state.dataset.unbooked;
        }
      })
      .catch(() => {});
  }
  setInterval(refreshStates, 30000);
  window.addEventListener("focus", refreshStates); // back from booking a GPU in another tab

  const count = document.getElementById("preview-count");
  const list = document.getElementById("preview-commands");
  const error = document.getElementById("preview-error");
  const more = document.getElementById("preview-more");
  let timer = null;
  let asked = 0;

  function preview() {
    if (!form.elements.template.value.trim() || !form.elements.values.value.trim()) return;
    const ask = ++asked;
    fetch(form.dataset.previewUrl, { method: "POST", body: new FormData(form), credentials: "same-origin" })
      .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
      .then(({ ok, body }) => {
        if (ask !== asked) return; // an older answer arriving late
        list.replaceChildren();
        more.textContent = "";
        if (!ok) {
          count.textContent = "not yet valid";
          error.textContent = body.detail || "The form cannot be previewed.";
          return;
        }
        error.textContent = "";
        count.textContent = body.count === 1 ? "1 task" : `${body.count} tasks`;
        for (const command of body.commands) {
          const item = document.createElement("li");
          item.textContent = command;
          list.append(item);
        }
        if (body.count > body.commands.length) more.textContent = `… and ${body.count - body.commands.length} more.`;
      })
      .catch(() => {});
  }
  form.addEventListener("input", (event) => {
    if (event.target.name === "devices") return;
    clearTimeout(timer);
    timer = setTimeout(preview, 300);
  });
  preview();
})();
