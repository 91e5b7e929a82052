/* The SLA charts, one look on every page that shows them (the pipeline page's SLA panel and
 * an objective's page): attainment per step against the target, and the error budget left.
 *
 * Both plot exactly what /api/slas/{id}/attainment/ answers, in UTC (C.utc). Defines
 * window.LB.slaChart; needs charts.js.
 */
(function () {
  "use strict";

  const C = window.LB.charts;
  const ATTAINMENT = C.PALETTE[0];
  const MISSED = "#b42318";
  const BUDGET = C.MUTED;
  const MAINTENANCE_FILL = "rgba(91, 100, 117, 0.18)";
  const MAINTENANCE_EDGE = "rgba(91, 100, 117, 0.55)";

  /** A percentage rounded down, as the pages' figures are: 99.8999 must not read 99.900. */
  function floorPercent(value, digits) {
    if (value === null || value === undefined) return "–";
    const scale = 10 ** digits;
    return (Math.floor(value * scale) / scale).toFixed(digits) + "%";
  }

  /** Shading and labels for maintenance: each range widened to whole steps (the shaded steps
   * are those whose points leave maintenance minutes out) and outlined, so that even an hour
   * on a month-wide axis shows; the label's hover gives the exact minutes. */
  function maintenanceDecorations(series) {
    const start = Date.parse(series.start);
    const end = Date.parse(series.end);
    const step = series.step_seconds * 1000;
    const steps = [];
    for (const range of series.maintenance || []) {
      const from = start + Math.floor((Date.parse(range.start) - start) / step) * step;
      const to = Math.min(end, start + Math.ceil((Date.parse(range.end) - start) / step) * step);
      const exact = `${C.formatTime(range.start)} to ${C.formatTime(range.end)}`;
      const last = steps[steps.length - 1];
      if (last && from <= last.to) {
        last.to = Math.max(last.to, to);
        last.exact.push(exact);
      } else {
        steps.push({ from, to, exact: [exact] });
      }
    }
    const labelled = steps.length <= 6;
    return {
      shapes: steps.map((s, index) => ({
        type: "rect", xref: "x", yref: "paper", x0: C.utc(s.from), x1: C.utc(s.to),
        y0: 0, y1: 1, fillcolor: MAINTENANCE_FILL, line: { color: MAINTENANCE_EDGE, width: 1 },
        layer: "below", name: "maintenance (left out)", legendgroup: "maintenance",
        showlegend: index === 0,
      })),
      annotations: steps.map((s) => {
        const middle = (s.from + s.to) / 2;
        // Near either edge the label grows inward, so the plot never clips it.
        const at = (middle - start) / (end - start);
        const xanchor = at > 0.85 ? "right" : at < 0.15 ? "left" : "center";
        const word = xanchor === "right" ? "maintenance ▼" : "▼ maintenance";
        return {
          x: C.utc(middle), xref: "x", y: 1, yref: "paper", yanchor: "bottom", xanchor,
          showarrow: false, text: labelled ? word : "▼", font: { size: 11, color: C.MUTED },
          hovertext: `maintenance, left out:<br>${s.exact.join("<br>")}`,
        };
      }),
    };
  }

  /** The error budget left at each moment of `points` ({at, remaining_percent, good, total}). */
  function budgetTrace(points, overlay) {
    const y = points.map((p) => p.remaining_percent);
    // A line of one or two points is hardly a line: show them as points too.
    const few = y.filter((v) => v !== null).length < 3;
    return {
      type: "scatter", mode: few ? "lines+markers" : "lines",
      name: "error budget left this period",
      x: points.map((p) => C.utc(p.at)), y, yaxis: overlay ? "y2" : "y",
      line: { color: BUDGET, width: 1.5, dash: "dash" }, marker: { size: 5, color: BUDGET },
      customdata: points.map((p) => [
        C.formatCount(p.total - p.good), C.formatCount(p.total),
        floorPercent(p.remaining_percent, 1), C.formatTime(p.at),
      ]),
      hovertemplate: "at %{customdata[3]}: <b>%{customdata[2]}</b> of the budget left " +
        "(%{customdata[0]} of %{customdata[1]} requests over the threshold)<extra></extra>",
    };
  }

  function paddedRange(values, low, high) {
    const present = values.filter((v) => v !== null);
    const lo = Math.min(low, ...present);
    const hi = Math.max(high, ...present);
    const pad = Math.max((hi - lo) * 0.08, 0.01);
    return [lo - pad, hi + pad];
  }

  /** Attainment per step of `series` (the attainment API's answer) against `objective`
   * ({targetPercent, thresholdMs}), over `xRange` ([start, end] ISO; the series' own by
   * default); with `budget` points, the budget left on a second axis. */
  function drawAttainment(element, series, objective, options) {
    const { budget = [], xRange = [series.start, series.end], name = "sla-attainment" } = options || {};
    const target = objective.targetPercent;
    const buckets = series.buckets;
    const counted = buckets.filter((b) => b.total > 0);
    const y = buckets.map((b) => b.attainment_percent);
    const traces = [{
      type: "scatter", mode: counted.length > 60 ? "lines" : "lines+markers",
      name: "attainment per step",
      x: buckets.map((b) => C.utc(b.start)), y,
      line: { color: ATTAINMENT, width: 2 },
      marker: { size: 5, color: buckets.map((b) => (b.attainment_percent >= target ? ATTAINMENT : MISSED)) },
      customdata: buckets.map((b) => [
        C.formatCount(b.good), C.formatCount(b.total), floorPercent(b.attainment_percent, 3),
        C.formatTime(b.start),
      ]),
      hovertemplate: `%{customdata[3]}: <b>%{customdata[2]}</b> under ${C.formatMs(objective.thresholdMs)}` +
        " (%{customdata[0]} of %{customdata[1]})<extra></extra>",
    }];
    if (budget.length) traces.push(budgetTrace(budget, true));
    // The objective is a legend entry, not a label on the plot: a label there lay over the
    // line and, near the right edge, over the budget's axis.
    traces.push({
      type: "scatter", mode: "lines", name: `objective: ${target}% within ${C.formatMs(objective.thresholdMs)}`,
      x: xRange.map(C.utc), y: [target, target], hoverinfo: "skip",
      line: { color: MISSED, width: 1.5, dash: "dash" },
    });
    const annotations = [];
    if (!counted.length) {
      annotations.push({
        xref: "paper", x: 0.5, yref: "paper", y: 0.5, showarrow: false,
        text: "No requests in this window: the dashed line is the budget left from earlier in the period",
        font: { size: 13, color: C.MUTED },
      });
    }
    const maintenance = maintenanceDecorations(series);
    const since = C.dataSince(counted.length ? Date.parse(counted[0].start) : null,
      Date.parse(xRange[0]), Date.parse(xRange[1]));
    element.dataset.dataSince = since ? since.at : "";
    const budgetValues = budget.map((p) => p.remaining_percent).filter((v) => v !== null);
    return C.draw(element, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 24, r: budget.length ? 64 : 16 },
      xaxis: { type: "date", range: xRange.map(C.utc), title: C.axisTitle("time", "UTC") },
      yaxis: {
        range: paddedRange(y, Math.max(0, target - 2 * (100 - target)), 100),
        title: C.axisTitle("requests within threshold", "%"), ticksuffix: "%",
      },
      // Only with a budget: Plotly fails on an axis key holding undefined.
      ...(budget.length ? {
        yaxis2: {
          overlaying: "y", side: "right", showgrid: false, zeroline: false, ticksuffix: "%",
          range: [Math.min(0, ...budgetValues) - 5, Math.max(100, ...budgetValues) + 5],
          title: C.axisTitle("error budget left", "%"),
        },
      } : {}),
      shapes: [...maintenance.shapes, ...(since ? [since.shape] : [])],
      annotations: [...annotations, ...maintenance.annotations, ...(since ? [since.annotation] : [])],
    }), name);
  }

  /** The error budget left over the objective's period: the burn-down of `series`. */
  function drawBudget(element, series, name) {
    // Alone on its chart the line needs no dash to tell it from the attainment.
    const trace = {
      ...budgetTrace(series.burn_down, false),
      line: { color: BUDGET, width: 2 }, fill: "tozeroy", fillcolor: "rgba(91, 100, 117, 0.08)",
    };
    const maintenance = maintenanceDecorations(series);
    return C.draw(element, [trace], C.layout({
      hovermode: "x unified",
      margin: { t: 24 },
      showlegend: true,
      xaxis: { type: "date", range: [C.utc(series.start), C.utc(series.end)], title: C.axisTitle("time", "UTC") },
      yaxis: {
        title: C.axisTitle("error budget left", "%"), ticksuffix: "%",
        range: paddedRange(trace.y, 0, 100), zeroline: true, zerolinecolor: MISSED, zerolinewidth: 1.5,
      },
      ...maintenance,
    }), name || "sla-error-budget");
  }

  window.LB.slaChart = { drawAttainment, drawBudget, floorPercent };
})();
