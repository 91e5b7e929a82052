/* Alert page: the alerted stage's percentile around the alert (from the json_script block
 * the page renders, no request of its own), the baseline's interval as a band, and the
 * firing and resolve times as marks. */
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("alert-chart-data").textContent);
  const chart = document.getElementById("alert-chart");
  const traces = [
    {
      type: "scatter",
      mode: "lines",
      name: data.quantile + " of " + data.stage,
      x: data.x,
      y: data.y,
      connectgaps: false,
      line: { color: "#D55E00", width: 2 },
      hovertemplate: "%{x|%H:%M} UTC: %{y:.1f} ms<extra></extra>",
    },
  ];
  const shapes = [];
  const annotations = [];
  const band = data.baseline;
  if (band && band.estimate !== null) {
    // An unbounded side (too few values) is drawn at the estimate: no band claims a bound.
    shapes.push({
      type: "rect",
      xref: "paper",
      x0: 0,
      x1: 1,
      y0: band.low === null ? band.estimate : band.low,
      y1: band.high === null ? band.estimate : band.high,
      fillcolor: "rgba(0, 114, 178, 0.15)",
      line: { width: 0 },
      layer: "below",
    });
    shapes.push({
      type: "line",
      xref: "paper",
      x0: 0,
      x1: 1,
      y0: band.estimate,
      y1: band.estimate,
      line: { color: "#0072B2", width: 1, dash: "dot" },
    });
  }
  const marks = [
    ["fired", data.fired_at, "#b42318"],
    ["resolved", data.resolved_at, "#1b6b3a"],
  ];
  for (const [label, at, color] of marks) {
    if (!at) continue;
    shapes.push({ type: "line", yref: "paper", x0: at, x1: at, y0: 0, y1: 1, line: { color, width: 1, dash: "dash" } });
    annotations.push({ x: at, yref: "paper", y: 1, text: label, showarrow: false, yanchor: "bottom", font: { color, size: 11 } });
  }
  const plain = window.LB.charts.withoutLinks;
  window.Plotly.newPlot(
    chart,
    plain(traces),
    plain({
      height: 240,
      margin: { l: 60, r: 20, t: 24, b: 40 },
      xaxis: { type: "date" },
      yaxis: { title: { text: "ms" }, rangemode: "tozero" },
      shapes,
      annotations,
      showlegend: false,
    }),
    { displayModeBar: false, responsive: true }
  );
  chart.dataset.state = "ready";
  chart.dataset.points = String(data.y.filter((y) => y !== null).length);
})();
