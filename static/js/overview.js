// Overview: a host's box ticks or clears all of its GPUs.
document.querySelectorAll(".ov-hostbox").forEach((box) => {
  box.addEventListener("change", () => {
    document.querySelectorAll('input[name=devices][data-host="' + box.dataset.host + '"]')
      .forEach((gpu) => { gpu.checked = box.checked; });
  });
});
