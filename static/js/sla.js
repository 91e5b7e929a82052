/* SLA pages: an objective's attainment and error-budget charts, and the new-objective form.
 *
 * The charts plot exactly what /api/slas/{id}/attainment/ answers, for the range the page
 * names in data-series-url (the objective's window, hourly). Uses window.LB.charts
 * (charts.js) for the shared look; Plotly is served locally.
 */
(function () {
  "use strict";

  const ATTAINMENT_COLOR = "#0072B2";
  const TARGET_COLOR = "#D55E00";
  const MAINTENANCE_FILL = "rgba(91, 100, 117, 0.18)";
  const MAINTENANCE_EDGE = "rgba(91, 100, 117, 0.55)";
  const SPENT_COLOR = "#b42318";

  // Plotly has no time zones: plot the UTC wall clock and say "UTC" on the axis.
  function utcWallClock(iso) {
    return iso.replace(/(Z|\+00:00)$/, "");
  }

  function wallClockOf(ms) {
    return new Date(ms).toISOString().replace(/Z$/, "");
  }

  /** A percentage rounded down, as the page's figures are: 99.8999 must not read 99.900. */
  function floorPercent(value, digits) {
    if (value === null || value === undefined) return "–";
    const scale = 10 ** digits;
    return (Math.floor(value * scale) / scale).toFixed(digits) + "%";
  }

  /** Shading and labels for maintenance: each range widened to whole steps (the shaded steps
   * are those whose points leave maintenance minutes out) and outlined, so that even an hour
   * on a month-wide axis shows; the label's hover gives the exact minutes. */
  function maintenanceDecorations(charts, series) {
    const start = Date.parse(series.start);
    const end = Date.parse(series.end);
    const step = series.step_seconds * 1000;
    const steps = [];
    for (const range of series.maintenance) {
      const from = start + Math.floor((Date.parse(range.start) - start) / step) * step;
      const to = Math.min(end, start + Math.ceil((Date.parse(range.end) - start) / step) * step);
      const exact = `${charts.formatTime(range.start)} to ${charts.formatTime(range.end)}`;
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
        type: "rect", xref: "x", yref: "paper", x0: wallClockOf(s.from), x1: wallClockOf(s.to),
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
          x: wallClockOf(middle), xref: "x", y: 1, yref: "paper", yanchor: "bottom", xanchor,
          showarrow: false, text: labelled ? word : "▼", font: { size: 11, color: charts.MUTED },
          hovertext: `maintenance, left out:<br>${s.exact.join("<br>")}`,
        };
      }),
    };
  }

  function xAxis(charts, series) {
    return {
      type: "date",
      title: charts.axisTitle("time", "UTC"),
      range: [utcWallClock(series.start), utcWallClock(series.end)],
    };
  }

  function paddedRange(values, low, high) {
    const present = values.filter((v) => v !== null);
    const lo = Math.min(low, ...present);
    const hi = Math.max(high, ...present);
    const pad = Math.max((hi - lo) * 0.08, 0.01);
    return [lo - pad, hi + pad];
  }

  function drawAttainment(charts, element, series, target) {
    const y = series.buckets.map((b) => b.attainment_percent);
    const x = series.buckets.map((b) => utcWallClock(b.start));
    const attainment = {
      name: "attainment", type: "scatter", mode: "lines+markers", x, y,
      xperiod: series.step_seconds * 1000, xperiodalignment: "middle",
      line: { color: ATTAINMENT_COLOR, width: 2 }, marker: { size: 3 },
      customdata: series.buckets.map((b) => [
        charts.formatCount(b.good), charts.formatCount(b.total),
        floorPercent(b.attainment_percent, 3), charts.formatTime(b.start),
      ]),
      hovertemplate: "%{customdata[3]}, 1 h<br><b>%{customdata[2]}</b> within threshold<br>"
        + "%{customdata[0]} of %{customdata[1]} requests<extra></extra>",
    };
    const targetLine = {
      name: `target ${target}%`, type: "scatter", mode: "lines", hoverinfo: "skip",
      x: [utcWallClock(series.start), utcWallClock(series.end)], y: [target, target],
      line: { color: TARGET_COLOR, width: 1.5, dash: "dash" },
    };
    return charts.draw(element, [attainment, targetLine], charts.layout({
      xaxis: xAxis(charts, series),
      yaxis: { title: charts.axisTitle("attainment", "%"), range: paddedRange(y, target, 100) },
      ...maintenanceDecorations(charts, series),
      margin: { t: 24 },
    }), "sla-attainment");
  }

  function drawBudget(charts, element, series) {
    const y = series.burn_down.map((p) => p.remaining_percent);
    // A line of one or two points is hardly a line: show them as points too.
    const points = y.filter((v) => v !== null).length;
    const remaining = {
      name: "error budget remaining", type: "scatter", mode: points < 3 ? "lines+markers" : "lines", x: series.burn_down.map((p) => utcWallClock(p.at)), y,
      line: { color: ATTAINMENT_COLOR, width: 2 }, fill: "tozeroy", fillcolor: "rgba(0, 114, 178, 0.08)",
      customdata: series.burn_down.map((p) => [
        charts.formatCount(p.total - p.good), charts.formatCount(p.total),
        floorPercent(p.remaining_percent, 1), charts.formatTime(p.at),
      ]),
      hovertemplate: "at %{customdata[3]}<br><b>%{customdata[2]}</b> of the budget left<br>"
        + "%{customdata[0]} of %{customdata[1]} requests over the threshold<extra></extra>",
    };
    return charts.draw(element, [remaining], charts.layout({
      xaxis: xAxis(charts, series),
      yaxis: {
        title: charts.axisTitle("error budget remaining", "%"), range: paddedRange(y, 0, 100),
        zeroline: true, zerolinecolor: SPENT_COLOR, zerolinewidth: 1.5,
      },
      ...maintenanceDecorations(charts, series),
      margin: { t: 24 },
      showlegend: true,
    }), "sla-error-budget");
  }

  async function drawCharts(container) {
    const charts = window.LB.charts;
    const attainmentChart = document.getElementById("sla-attainment-chart");
    const budgetChart = document.getElementById("sla-budget-chart");
    const target = Number(container.dataset.target);
    try {
      const [url, query] = container.dataset.seriesUrl.split("?");
      const series = await charts.getJson(url, new URLSearchParams(query));
      if (series.buckets.every((b) => b.total === 0)) {
        const why = "No requests counted in this window yet: requests are counted as their " +
          "minute is folded, seconds after their spans arrive.";
        charts.message(attainmentChart, why);
        charts.message(budgetChart, why);
      } else {
        await drawAttainment(charts, attainmentChart, series, target);
        if (series.burn_down.every((p) => p.remaining_percent === null)) {
          charts.message(budgetChart, "A 100% target leaves no error budget to spend.");
        } else {
          await drawBudget(charts, budgetChart, series);
        }
      }
      container.dataset.state = "ready";
    } catch (error) {
      charts.message(attainmentChart, `Could not load attainment: ${error.message}`);
      charts.message(budgetChart, `Could not load the error budget: ${error.message}`);
      container.dataset.state = "error";
    }
  }

  /** The new-objective form: offer only the chosen pipeline's stages (the server checks too). */
  function limitStages(pipeline, stage) {
    function update() {
      for (const option of stage.options) {
        if (!option.dataset.pipeline) continue; // end to end
        const ours = option.dataset.pipeline === pipeline.value;
        option.hidden = !ours;
        option.disabled = !ours;
        if (!ours && option.selected) stage.value = "";
      }
    }
    pipeline.addEventListener("change", update);
    update();
  }

  const container = document.getElementById("sla-charts");
  if (container) drawCharts(container);
  const pipeline = document.getElementById("id_pipeline");
  const stage = document.getElementById("id_stage");
  if (pipeline && stage) limitStages(pipeline, stage);
})();
