// The overview table sorts by any column whose heading is a button: click (or Enter/Space
// on the focused button) sorts by it, again reverses. Cells give their value in
// data-sort-value; rows without one go last either way. aria-sort tells screen readers.
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
