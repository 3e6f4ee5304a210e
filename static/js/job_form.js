/* The guided job form: each option's fields show while it is chosen; the GPU picker lists
 * the chosen host's GPUs, their booking states and whether you may start on each now, kept
 * fresh from the API (/api/device-states/, /api/placement/); and a live preview of the
 * tasks the form makes, answered by the API (/api/jobs/preview/: the code that creates
 * them), never expanded here.
 * Without this script the whole form shows and works; the server ignores the fields of the
 * options not chosen. */
(function () {
  "use strict";
  const form = document.getElementById("job-form");
  if (!form) return;
  const host = form.elements.host;
  const picker = document.getElementById("gpu-picker");

  // --- the options chosen, and their fields ---
  const chosen = (name) => (form.querySelector(`input[name="${name}"]:checked`) || {}).value;
  const pickedOnly = form.dataset.pickedOnly.split(" ");
  const button = document.getElementById("make-button");

  function showChosen() {
    const where = chosen("where");
    // "At a set time" and "Not yet" need GPUs picked on the list (the server says so too).
    for (const value of pickedOnly) {
      const radio = form.querySelector(`input[name="when"][value="${value}"]`);
      radio.disabled = where !== "devices";
      if (radio.disabled && radio.checked) form.querySelector('input[name="when"][value="queue"]').checked = true;
    }
    for (const name of ["where", "when"]) {
      const value = chosen(name);
      for (const part of form.querySelectorAll(`[data-for-${name}]`)) {
        part.hidden = !part.getAttribute(`data-for-${name}`).split(" ").includes(value);
      }
    }
    button.textContent = button.dataset[chosen("when")] || button.textContent;
    if (where === "devices") showHostGpus();
  }
  form.addEventListener("change", (event) => {
    if (["where", "when"].includes(event.target.name)) showChosen();
  });
  showChosen();

  // --- the GPU picker ---
  function showHostGpus() {
    for (const group of picker.querySelectorAll(".gpu-pick-host")) {
      const shown = !host.value || group.dataset.host === host.value;
      group.hidden = !shown;
      if (!shown) group.querySelectorAll("input").forEach((box) => { box.checked = false; });
    }
  }
  host.addEventListener("change", () => { if (chosen("where") === "devices") showHostGpus(); });
  // Ticking a GPU before choosing a host chooses its host (a task runs on one host).
  picker.addEventListener("change", (event) => {
    const group = event.target.closest(".gpu-pick-host");
    if (event.target.checked && group && host.value !== group.dataset.host) {
      host.value = group.dataset.host;
      showHostGpus();
    }
  });

  function refreshStates() {
    if (document.hidden) return;
    hiveApi.deviceStates().then((states) => {
      for (const tile of picker.querySelectorAll(".gpu-pick")) {
        const state = tile.querySelector(".gt-state");
        const booked = states.get(Number(tile.dataset.gpu));
        state.textContent = booked ? booked.text : state.dataset.unbooked;
      }
    }).catch(() => {});
    hiveApi.all("placement/", { page_size: 1000 }).then((gpus) => {
      for (const gpu of gpus) {
        const line = picker.querySelector(`.gpu-pick[data-gpu="${gpu.id}"] .gt-usable`);
        if (!line) continue;
        line.dataset.usable = gpu.usable ? "1" : "0";
        line.textContent = gpu.usable
          ? picker.dataset.usableText
          : picker.dataset.unusableText + gpu.reasons[0].detail;
      }
    }).catch(() => {});
  }
  setInterval(refreshStates, 30000);
  window.addEventListener("focus", refreshStates); // back from booking a GPU in another tab

  // --- the preview ---
  const count = document.getElementById("preview-count");
  const list = document.getElementById("preview-commands");
  const error = document.getElementById("preview-error");
  const more = document.getElementById("preview-more");
  const PREVIEWED = ["template", "values", "samples", "seed", "env"];
  let timer = null;
  let asked = 0;

  function preview() {
    if (!form.elements.template.value.trim()) return;
    const ask = ++asked;
    const text = (name) => form.elements[name].value;
    const number = (name) => (text(name).trim() === "" ? null : text(name)); // empty: none
    const fields = {
      template: text("template"), values: text("values"), env: text("env"),
      samples: number("samples"), seed: number("seed"),
    };
    hiveApi.post("jobs/preview/", fields) // an older answer arriving late is dropped
      .then((body) => { if (ask === asked) showCommands(body); })
      .catch((refusal) => { if (ask === asked) showRefusal(refusal.message); });
  }

  function clear(problem) {
    list.replaceChildren();
    more.textContent = "";
    error.textContent = problem;
  }

  function showCommands(body) {
    clear("");
    count.textContent = body.count === 1 ? "1 task" : `${body.count} tasks`;
    for (const command of body.commands) {
      const item = document.createElement("li");
      item.textContent = command;
      list.append(item);
    }
    if (body.count > body.commands.length) more.textContent = `… and ${body.count - body.commands.length} more.`;
  }

  function showRefusal(message) {
    clear(message);
    count.textContent = "not yet valid";
  }

  form.addEventListener("input", (event) => {
    if (!PREVIEWED.includes(event.target.name)) return;
    clearTimeout(timer);
    timer = setTimeout(preview, 300);
  });
  preview();
})();
