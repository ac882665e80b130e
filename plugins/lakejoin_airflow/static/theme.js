// Light or dark as Airflow shows it: the Airflow UI around this page (same origin, its <html>
// carries class "dark" or "light"), else Airflow's stored choice (localStorage "theme": light,
// dark or system), else the system's setting. Runs in <head> so the page never flashes.
"use strict";

(function followAirflowTheme() {
  const media = window.matchMedia("(prefers-color-scheme: dark)");

  function airflowFrameTheme() {
    try {
      const classes = window.parent !== window ? window.parent.document.documentElement.classList : null;
      if (classes && classes.contains("dark")) return "dark";
      if (classes && classes.contains("light")) return "light";
    } catch (e) { /* not inside the Airflow UI */ }
    return null;
  }

  function storedTheme() {
    try {
      const stored = window.localStorage.getItem("theme");
      return stored === "dark" || stored === "light" ? stored : null;
    } catch (e) { return null; }
  }

  function apply() {
    const theme = airflowFrameTheme() || storedTheme() || (media.matches ? "dark" : "light");
    document.documentElement.dataset.theme = theme;
    document.documentElement.style.colorScheme = theme;
  }

  apply();
  media.addEventListener("change", apply);
  window.addEventListener("storage", (event) => { if (event.key === "theme") apply(); });
  try {
    if (window.parent !== window) {
      new MutationObserver(apply).observe(window.parent.document.documentElement, { attributes: true, attributeFilter: ["class"] });
    }
  } catch (e) { /* not inside the Airflow UI */ }
})();
