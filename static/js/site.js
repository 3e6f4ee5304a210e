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
