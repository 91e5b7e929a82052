/* SLA pages: an objective's attainment and error-budget charts, and the new-objective form.
 *
 * The charts (sla_chart.js, the same as the pipeline page's) plot exactly what
 * /api/slas/{id}/attainment/ answers, for the range the page names in data-series-url (the
 * objective's window, hourly). While the page is open, new minutes of the pipeline redraw them.
 */
(function () {
  "use strict";

  // A busy pipeline folds every few seconds; an hourly chart needs redrawing far less often.
  const LIVE_REDRAW_MS = 10000;

  async function drawCharts(container) {
    const charts = window.LB.charts;
    const attainmentChart = document.getElementById("sla-attainment-chart");
    const budgetChart = document.getElementById("sla-budget-chart");
    const objective = { targetPercent: Number(container.dataset.target), thresholdMs: Number(container.dataset.threshold) };
    try {
      const [url, query] = container.dataset.seriesUrl.split("?");
      const series = await charts.getJson(url, new URLSearchParams(query));
      if (series.buckets.every((b) => b.total === 0)) {
        const why = "No requests counted in this window yet: requests are counted as their " +
          "minute is folded, seconds after their spans arrive.";
        charts.message(attainmentChart, why);
        charts.message(budgetChart, why);
      } else {
        await window.LB.slaChart.drawAttainment(attainmentChart, series, objective);
        if (series.burn_down.every((p) => p.remaining_percent === null)) {
          charts.message(budgetChart, "A 100% target leaves no error budget to spend.");
        } else {
          await window.LB.slaChart.drawBudget(budgetChart, series);
        }
      }
      container.dataset.state = "ready";
    } catch (error) {
      charts.message(attainmentChart, `Could not load attainment: ${error.message}`);
      charts.message(budgetChart, `Could not load the error budget: ${error.message}`);
      container.dataset.state = "error";
    }
  }

  /** Redraw the charts when the pipeline gets new minutes, at most once per LIVE_REDRAW_MS,
   * and after a reconnect (what was folded meanwhile). */
  function followLive(container) {
    if (!window.LatencyboardLive || !container.dataset.pipeline) return;
    const live = window.LatencyboardLive.connect(`/ws/live/pipelines/${container.dataset.pipeline}/`);
    let timer = null;
    const later = () => {
      if (timer === null) timer = setTimeout(() => { timer = null; drawCharts(container); }, LIVE_REDRAW_MS);
    };
    live.addEventListener("points", later);
    live.addEventListener("resync", () => drawCharts(container));
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
  if (container) {
    drawCharts(container);
    followLive(container);
  }
  const pipeline = document.getElementById("id_pipeline");
  const stage = document.getElementById("id_stage");
  if (pipeline && stage) limitStages(pipeline, stage);
})();
