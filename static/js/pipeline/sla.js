/* Pipeline page panel: SLA attainment of the chosen objective over the window, and its error
 * budget. The header's figures are the objective's period (rolling 28 days or the calendar
 * month); the budget line on the chart is that same period's budget as it stood at each step,
 * so its last point is the header's figure. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el } = page;
  const chart = el("chart-sla");
  const BAD = "#b42318";
  // The attainment API's cap on steps (latencyboard.sla.attainment.MAX_BUCKETS).
  const MAX_STEPS = 10000;
  let objectiveId = (cfg.objectives.find((o) => o.stage === null) || cfg.objectives[0] || {}).id;

  function drawBudget(objective, body) {
    const panel = el("budget");
    const summary = body.summary;
    panel.replaceChildren();
    const line = (text, className) => {
      const p = document.createElement("p");
      if (className) p.className = className;
      p.textContent = text;
      panel.append(p);
    };
    const subject = objective.stage ? `${objective.stage} spans` : "requests";
    line(`${objective.name}: ${objective.targetPercent}% of ${subject} under ` +
      `${C.formatMs(objective.thresholdMs)}, ${objective.window.toLowerCase()} ` +
      `(${C.formatTime(body.window.start)} to now).`, "muted small");
    if (summary.attainment_percent === null) {
      line("Nothing counted in this period yet.");
      return;
    }
    const big = document.createElement("div");
    big.className = "figures";
    const figure = (label, value, className) => {
      const box = document.createElement("div");
      box.className = `figure ${className || ""}`;
      const v = document.createElement("strong");
      v.textContent = value;
      const l = document.createElement("span");
      l.textContent = label;
      box.append(v, l);
      big.append(box);
    };
    figure("attainment this period", `${summary.attainment_percent.toFixed(3)}%`, summary.met ? "good" : "bad");
    const remaining = summary.remaining_percent;
    figure(remaining !== null && remaining < 0 ? "error budget left this period (overspent)" : "error budget left this period",
      remaining === null ? "–" : `${remaining.toFixed(1)}%`, (remaining ?? 0) > 0 ? "" : "bad");
    figure("slow requests allowed / used",
      `${C.formatCount(Number(summary.allowed_bad))} / ${C.formatCount(summary.bad)}`);
    panel.append(big);
  }

  /** The period's budget at each step of the window: the burn-down counted from the period's
   * start, in steps no finer than the window's. */
  async function periodBudget(objective, body, range) {
    const from = Date.parse(body.window.start);
    const minutes = (Date.parse(range.end) - from) / 60000;
    const step = Math.max(range.step, Math.ceil(minutes / MAX_STEPS) * 60);
    const period = await C.getJson(objective.attainmentUrl, {
      start: body.window.start, end: range.end, step: String(step),
    });
    const start = Date.parse(range.start);
    return period.burn_down.filter((p) => p.remaining_percent !== null && Date.parse(p.at) >= start);
  }

  function draw(objective, body, budget) {
    const target = objective.targetPercent;
    const buckets = body.buckets;
    const counted = buckets.filter((b) => b.total > 0);
    if (!counted.length && !budget.length) {
      C.message(chart, "No requests counted for this objective in this window, nor earlier in " +
        "its period. Requests are counted as their minute is folded, within seconds.");
      return;
    }
    const lowest = Math.min(target, ...counted.map((b) => b.attainment_percent));
    // Room under the lowest point, so that it is not drawn on the axis line.
    const floor = Math.max(0, Math.min(lowest - (100 - lowest) * 0.08, target - 2 * (100 - target)));
    const since = C.formatTime(body.window.start);
    const traces = [{
      type: "scatter",
      mode: counted.length > 60 ? "lines" : "lines+markers",
      name: "attainment per step",
      x: buckets.map((b) => b.start),
      y: buckets.map((b) => b.attainment_percent),
      customdata: buckets.map((b) => [b.good, b.total]),
      line: { color: C.PALETTE[0], width: 2 },
      marker: {
        size: 5,
        color: buckets.map((b) => (b.attainment_percent >= target ? C.PALETTE[0] : BAD)),
      },
      hovertemplate: "<b>%{y:.3f}%</b> under " + C.formatMs(objective.thresholdMs) +
        " (%{customdata[0]:,} of %{customdata[1]:,})<extra></extra>",
    }];
    if (budget.length) {
      traces.push({
        type: "scatter",
        mode: budget.length > 60 ? "lines" : "lines+markers",
        name: "error budget left this period",
        x: budget.map((p) => p.at),
        y: budget.map((p) => p.remaining_percent),
        yaxis: "y2",
        line: { color: C.MUTED, width: 1.5, dash: "dash" },
        marker: { size: 5, color: C.MUTED },
        hovertemplate: `budget left this period (since ${since}): %{y:.1f}%<extra></extra>`,
      });
    }
    const annotations = [{
      xref: "paper", x: 1, xanchor: "right", yref: "y", y: target, yanchor: "bottom",
      showarrow: false, bgcolor: "rgba(255,255,255,0.8)",
      text: `objective: ${target}% within ${C.formatMs(objective.thresholdMs)}`,
      font: { size: 11, color: BAD },
    }];
    if (!counted.length) {
      annotations.push({
        xref: "paper", x: 0.5, yref: "paper", y: 0.5, showarrow: false,
        text: "No requests in this window: the dashed line is the budget left from earlier in the period",
        font: { size: 13, color: C.MUTED },
      });
    }
    const budgetValues = budget.map((p) => p.remaining_percent);
    C.draw(chart, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 12, r: budget.length ? 64 : 16 },
      xaxis: page.timeAxis(),
      yaxis: {
        range: [floor, 100 + (100 - floor) * 0.03],
        title: C.axisTitle("requests within threshold", "%"),
        ticksuffix: "%",
      },
      yaxis2: budget.length ? {
        overlaying: "y",
        side: "right",
        range: [Math.min(0, ...budgetValues) - 5, Math.max(100, ...budgetValues) + 5],
        title: C.axisTitle("error budget left", "%"), ticksuffix: "%", showgrid: false, zeroline: false,
      } : undefined,
      shapes: [{
        type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: target, y1: target,
        line: { color: BAD, width: 1.5, dash: "dash" },
      }],
      annotations,
    }), `${cfg.pipeline.name}-sla`);
  }

  async function refresh(range, mine) {
    const objective = cfg.objectives.find((o) => o.id === objectiveId);
    if (!objective || !chart) return;
    try {
      const body = await C.getJson(objective.attainmentUrl, {
        start: range.start, end: range.end, step: String(range.step),
      });
      const budget = body.summary.remaining_percent === null ? [] : await periodBudget(objective, body, range);
      if (!page.current(mine)) return;
      drawBudget(objective, body);
      draw(objective, body, budget);
    } catch (error) {
      if (page.current(mine)) page.failed(chart, error);
    }
  }

  const picker = el("objective-picker");
  if (picker) {
    picker.value = String(objectiveId);
    picker.addEventListener("change", () => {
      objectiveId = Number(picker.value);
      refresh(page.range, page.generation);
    });
  }

  // The percentile and the log scale change nothing here.
  page.panels.push({ refresh, redraw() {} });
})();
