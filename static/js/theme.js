/* Light or dark, as the system says (Bootstrap's data-bs-theme), now and when it changes. */
(function () {
  "use strict";
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  const apply = () => document.documentElement.setAttribute("data-bs-theme", dark.matches ? "dark" : "light");
  apply();
  dark.addEventListener("change", apply);
})();
