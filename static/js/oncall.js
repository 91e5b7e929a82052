/* Alert page: the baseline and current percentile of the regressed stage, each with its
 * interval, from the json_script block the page renders (no request of its own). */
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("alert-chart-data").textContent);
  const chart = document.getElementById("alert-chart");
  const rows = [
    ["baseline", data.baseline, "#0072B2"],
    ["current", data.current, "#D55E00"],
  ];
  // An unbounded side (too few values) is drawn to the estimate: no bar claims a bound.
  const upper = (f) => (f.high === null ? 0 : f.high - f.estimate);
  const lower = (f) => (f.low === null ? 0 : f.estimate - f.low);
  const trace = {
    type: "scatter",
    mode: "markers",
    orientation: "h",
    y: rows.map((r) => r[0]),
    x: rows.map((r) => r[1].estimate),
    marker: { size: 12, color: rows.map((r) => r[2]) },
    error_x: {
      type: "data",
      symmetric: false,
      array: rows.map((r) => upper(r[1])),
      arrayminus: rows.map((r) => lower(r[1])),
      thickness: 2,
      width: 8,
    },
    hovertemplate: "%{y}: %{x:.1f} ms<extra></extra>",
  };
  window.Plotly.newPlot(
    chart,
    [trace],
    {
      height: 180,
      margin: { l: 80, r: 20, t: 10, b: 40 },
      xaxis: { title: { text: data.quantile + " of " + data.stage + " (ms)" }, rangemode: "tozero" },
      yaxis: { autorange: "reversed" },
      showlegend: false,
    },
    { displayModeBar: false, responsive: true }
  );
  chart.dataset.state = "ready";
})();
