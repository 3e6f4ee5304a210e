/* EventCalendar marks its whole widget role=table, with its toolbar, time sidebars and the
 * bookings (<article>s floating over the grid) inside the table's rows and row groups: a
 * table whose structure is false (axe: aria-required-children, critical), which a screen
 * reader walks into wrongly. Its grid is drawn, not tabular: the calendar becomes a labelled
 * region, its grid parts plain groups, and each booking stays an article with its time and
 * title. The calendar redraws itself (a new week, a new view), so every redraw is corrected.
 * Every .ec on the page is kept so. */
(function () {
  "use strict";
  const GRID_ROLES = ["table", "rowgroup", "row", "columnheader", "rowheader", "cell"];
  // The table's own attributes go with its roles (a plain group may not carry them).
  const GRID_ATTRIBUTES = ["aria-colindex", "aria-colspan", "aria-colcount",
    "aria-rowindex", "aria-rowspan", "aria-rowcount"];
  const selector = GRID_ROLES.map((role) => `.ec [role="${role}"]`)
    .concat(GRID_ATTRIBUTES.map((name) => `.ec [${name}]`)).join(", ");

  function correct() {
    for (const widget of document.querySelectorAll(".ec")) {
      if (widget.getAttribute("role") !== "region") {
        widget.setAttribute("role", "region");
        widget.setAttribute("aria-label", "Bookings calendar");
      }
    }
    for (const part of document.querySelectorAll(selector)) {
      if (GRID_ROLES.includes(part.getAttribute("role"))) part.removeAttribute("role");
      GRID_ATTRIBUTES.forEach((name) => part.removeAttribute(name));
    }
  }

  correct();
  new MutationObserver(correct).observe(document.body, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["role", ...GRID_ATTRIBUTES],
  });
})();
