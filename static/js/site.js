/* On every page: a table wider than the screen scrolls inside itself (hive.css). Make that
 * visible and reachable: the table is focusable by keyboard (its hidden columns can be
 * scrolled to without a mouse), its cut edge fades while more lies that way, and a line
 * above it says it scrolls. Tables drawn later (live pages) are marked as they change. */
(function () {
  "use strict";
  const HINT = "hive-scroll-hint";

  function edges(table) {
    const left = table.scrollLeft > 1;
    const right = table.scrollLeft + table.clientWidth < table.scrollWidth - 1;
    table.classList.toggle("hive-more-left", left);
    table.classList.toggle("hive-more-right", right);
  }

  function mark(table) {
    const wide = table.scrollWidth > table.clientWidth + 1;
    let hint = table.previousElementSibling;
    if (!hint || !hint.classList.contains(HINT)) hint = null;
    if (wide) {
      table.tabIndex = 0;
      if (!hint) {
        hint = document.createElement("p");
        hint.className = `${HINT} note small mb-1`;
        hint.textContent = "Wide table: scroll it sideways ↔";
        table.before(hint);
      }
      if (!table.dataset.hiveEdges) {
        table.dataset.hiveEdges = "1";
        table.addEventListener("scroll", () => edges(table), { passive: true });
      }
    } else {
      table.removeAttribute("tabindex");
      if (hint) hint.remove();
    }
    edges(table);
  }

  const markAll = () => document.querySelectorAll(".hive-main .table").forEach(mark);
  markAll();
  window.addEventListener("resize", markAll);
  window.addEventListener("load", markAll);
})();
