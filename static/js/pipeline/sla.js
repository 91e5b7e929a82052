/* Pipeline page panel: SLA attainment of the chosen objective over the window, and its error
 * budget. The header's figures are the objective's period (rolling 28 days or the calendar
 * month); the budget line on the chart is that same period's budget as it stood at each step,
 * so its last point is the header's figure. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el } = page;
  const chart = el("chart-sla");
  // The attainment API's cap on steps (latencyboard.sla.attainment.MAX_BUCKETS).
  const MAX_STEPS = 10000;
  const LIVE_REDRAW_MS = 10000;
  let objectiveId = (cfg.objectives.find((o) => o.stage === null) || cfg.objectives[0] || {}).id;
  let url = null;

  function drawFigures(objective, body) {
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
      `${C.formatCount(Math.floor(Number(summary.allowed_bad)))} / ${C.formatCount(summary.bad)}`);
    panel.append(big);
  }

  /** The period's budget at each step of the window: the burn-down counted from the period's
   * start to the end of the header's period (the server's minute, which a page loaded just
   * before a minute turned is one behind), in steps no finer than the window's. */
  async function periodBudget(objective, body, range) {
    const from = Date.parse(body.window.start);
    const minutes = (Date.parse(body.window.end) - from) / 60000;
    const step = Math.max(range.step, Math.ceil(minutes / MAX_STEPS) * 60);
    const period = await C.getJson(url, {
      objective: objective.id, start: body.window.start, end: body.window.end, step: String(step),
    });
    const start = Date.parse(range.start);
    return period.burn_down.filter((p) => p.remaining_percent !== null && Date.parse(p.at) >= start);
  }

  function draw(objective, body, budget, range) {
    if (!body.buckets.some((b) => b.total > 0) && !budget.length) {
      C.message(chart, "No requests counted for this objective in this window, nor earlier in " +
        "its period. Requests are counted as their minute is folded, within seconds.");
      return;
    }
    window.LB.slaChart.drawAttainment(chart, body, objective, {
      budget, xRange: [range.start, range.now], name: `${cfg.pipeline.name}-sla`,
    });
  }

  async function refresh(range, mine) {
    const objective = cfg.objectives.find((o) => o.id === objectiveId);
    if (!objective || !chart) return;
    try {
      const body = await C.getJson(url, {
        objective: objective.id, start: range.start, end: range.end, step: String(range.step),
      });
      const budget = body.summary.remaining_percent === null ? [] : await periodBudget(objective, body, range);
      if (!page.current(mine)) return;
      drawFigures(objective, body);
      draw(objective, body, budget, range);
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

  // New minutes change the last step's attainment and the budget: redrawn at most once per
  // LIVE_REDRAW_MS, a busy pipeline publishing every second or so.
  let pending = null;
  function later() {
    if (pending === null) {
      pending = setTimeout(() => { pending = null; refresh(page.range, page.generation); }, LIVE_REDRAW_MS);
    }
  }

  // The percentile and the log scale change nothing here.
  page.draw("sla", (chart) => {
    url = chart.url;
    return { refresh, redraw() {}, on: { points: later } };
  });
})();
