// The overview table sorts by any column whose heading is a button: click (or Enter/Space
// on the focused button) sorts by it, again reverses. Cells give their value in
// data-sort-value; rows without one go last either way. aria-sort tells screen readers.
//
// While the page is open, a "rollup" live event (pipelines with newly folded minutes) has the
// rows of those pipelines rendered again by the server and swapped in place, keeping the
// user's sort; at most once per LIVE_REFRESH_MS, the overview's queries being the heavy kind.
(function () {
  "use strict";

  const table = document.getElementById("overview");
  if (!table) return;
  const body = table.tBodies[0];
  const headers = Array.from(table.tHead.rows[0].cells);

  function value(row, column, numeric) {
    const raw = row.cells[column].dataset.sortValue;
    if (raw === undefined || raw === "") return null;
    return numeric ? Number(raw) : raw;
  }

  function sortBy(column, numeric, ascending) {
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = value(a, column, numeric);
      const y = value(b, column, numeric);
      if (x === null || y === null) return (x === null) - (y === null);
      const order = numeric ? x - y : x.localeCompare(y);
      return ascending ? order : -order;
    });
    body.append(...rows);
  }

  const LIVE_REFRESH_MS = 5000;
  const changed = new Set();
  let timer = null;

  async function refreshRows() {
    timer = null;
    const wanted = new Set(changed);
    changed.clear();
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const row of fresh.querySelectorAll("#overview tbody tr[data-pipeline]")) {
      if (!wanted.has(Number(row.dataset.pipeline))) continue;
      const shown = body.querySelector(`tr[data-pipeline="${row.dataset.pipeline}"]`);
      if (shown) shown.replaceChildren(...row.children);
      else body.append(document.importNode(row, true));
    }
    table.dataset.liveUpdated = String(Date.now());
  }

  if (window.LatencyboardLive) {
    const live = window.LatencyboardLive.connect("/ws/live/");
    live.addEventListener("rollup", (event) => {
      for (const pipeline of event.detail.pipelines) changed.add(pipeline);
      if (timer === null) timer = setTimeout(refreshRows, LIVE_REFRESH_MS);
    });
    live.addEventListener("resync", () => {
      for (const row of body.rows) changed.add(Number(row.dataset.pipeline));
      if (timer === null) timer = setTimeout(refreshRows, 0);
    });
  }

  headers.forEach((header, column) => {
    const button = header.querySelector("button[data-sort]");
    if (!button) return;
    button.addEventListener("click", () => {
      const ascending = header.getAttribute("aria-sort") !== "ascending";
      headers.forEach((other) => other.removeAttribute("aria-sort"));
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      sortBy(column, button.dataset.sort === "number", ascending);
    });
  });
})();
