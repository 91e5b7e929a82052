/* Pipeline page panel: where the time goes (mean self time per stage, all requests and the
 * slowest 1%: the requests above the window's p99) and how the stage shares moved over the
 * window (each step's slowest 1% above the step's own p99; steps with too few left out). */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el } = page;
  const charts = { breakdown: el("chart-breakdown"), shares: el("chart-shares") };
  // Stage shares are computed by a worker once a minute is complete, with a grace period for
  // late spans (latencyboard.rollups.share_services).
  const grace = cfg.stageShareGraceSeconds;
  const after = grace % 60 === 0 ? `${grace / 60} minute${grace === 60 ? "" : "s"}` : `${grace} seconds`;
  const NOT_YET = `Stage shares are computed ${after} after a minute ends`;
  let body = null;
  let deployments = [];
  let cohort = "all";
  const TAIL_MIN = 10; // latencyboard.rollups.tails.MIN_TAIL_REQUESTS

  function drawBreakdown() {
    if (!body.requests) {
      C.message(charts.breakdown, `No requests with a complete stage breakdown in this window. ${NOT_YET}, ` +
        "from requests whose root span and stage spans were all received.");
      return;
    }
    // The slowest 1% is the requests above the window's p99; a bar of a handful of them would
    // describe those few, not a tail: with too few it is not drawn, and the chart says why.
    const tail = body.tail_shown;
    const rows = [
      ...(tail ? [`slowest 1%<br>${C.formatMs(body.mean_root_ms_tail)} mean`] : []),
      `all requests<br>${C.formatMs(body.mean_root_ms_all)} mean`,
    ];
    const pick = (stage) => (tail
      ? { x: [stage.share_tail, stage.share_all], mean: [stage.mean_self_ms_tail, stage.mean_self_ms_all] }
      : { x: [stage.share_all], mean: [stage.mean_self_ms_all] });
    const traces = body.stages.map((stage) => ({
      type: "bar",
      orientation: "h",
      name: page.stageLabel(stage),
      y: rows,
      x: pick(stage).x.map((v) => v * 100),
      customdata: pick(stage).x.map((v, i) => [C.formatMs(pick(stage).mean[i]), v * 100]),
      text: pick(stage).x.map((s) => (s >= 0.07 ? stage.name : "")),
      textposition: "inside",
      insidetextanchor: "middle",
      textfont: { color: "#fff", size: 11 },
      marker: { color: page.colors[stage.name], line: { color: "#fff", width: 1 } },
      hovertemplate: `${page.stageLabel(stage)}: <b>%{customdata[0]}</b> per request` +
        " (%{customdata[1]:.1f}% of the time)<extra></extra>",
    }));
    C.draw(charts.breakdown, traces, C.layout({
      barmode: "stack",
      bargap: 0.35,
      margin: { l: 100, t: 8, b: 44 },
      xaxis: { range: [0, 100], title: C.axisTitle("share of request time", "%"), ticksuffix: "%" },
      yaxis: { automargin: true },
      legend: { orientation: "h", y: -0.42, traceorder: "normal" },
      annotations: tail ? [] : [{
        xref: "paper", x: 0, xanchor: "left", yref: "paper", y: 1, yanchor: "bottom",
        showarrow: false, align: "left", font: { size: 11, color: C.MUTED },
        text: `No slowest-1% bar: ${C.formatCount(body.tail_requests)} request` +
          `${body.tail_requests === 1 ? "" : "s"} above the window's p99, ${TAIL_MIN} needed ` +
          "(about 1,000 requests in the window)",
      }],
    }), `${cfg.pipeline.name}-breakdown`);
    charts.breakdown.dataset.tail = tail ? "shown" : "too-few";
  }

  function drawShares() {
    const series = body.series;
    const field = cohort === "tail" ? "share_tail" : "share_all";
    // Buckets without requests have no shares: left out, rather than stacked as zeros.
    const kept = series ? series.buckets.map((_, i) => series.stages.some((s) => s[field][i] !== null)) : [];
    const count = kept.filter(Boolean).length;
    if (!count) {
      C.message(charts.shares, `No stage shares in this window yet. ${NOT_YET}.`);
      return;
    }
    const order = new Map(body.stages.map((s, i) => [s.id, i]));
    const stages = [...series.stages].sort((a, b) => (order.get(a.id) ?? 99) - (order.get(b.id) ?? 99));
    // An area of one or two steps is a sliver: a few steps are drawn as stacked bars.
    const bars = count < 3;
    const traces = stages.map((stage) => ({
      type: bars ? "bar" : "scatter",
      mode: "lines",
      stackgroup: bars ? undefined : "shares",
      // a bar spans its step, from the step's start
      width: bars ? series.step_seconds * 1000 : undefined,
      offset: bars ? 0 : undefined,
      name: page.stageLabel(stage),
      x: series.buckets.filter((_, i) => kept[i]),
      y: stage[field].filter((_, i) => kept[i]).map((v) => (v ?? 0) * 100),
      line: { width: 0.5, color: page.colors[stage.name] },
      marker: { color: page.colors[stage.name] },
      fillcolor: page.colors[stage.name],
      hovertemplate: `${page.stageLabel(stage)}: %{y:.1f}%<extra></extra>`,
    }));
    const decorations = C.deploymentDecorations(deployments);
    C.draw(charts.shares, traces, C.layout({
      barmode: "stack",
      hovermode: "x unified",
      margin: { t: 26 },
      xaxis: page.timeAxis(),
      yaxis: { range: [0, 100], title: C.axisTitle("share of self time", "%"), ticksuffix: "%" },
      legend: { traceorder: "normal" },
      shapes: decorations.shapes,
      annotations: decorations.annotations,
    }), `${cfg.pipeline.name}-shares`);
  }

  function draw() {
    if (!body) return;
    drawBreakdown();
    drawShares();
  }

  async function refresh(range, mine) {
    try {
      const answer = await C.getJson(cfg.urls.breakdown, {
        start: range.start, end: range.end, step: String(range.step),
      });
      const markers = await page.deployments;
      if (!page.current(mine)) return;
      body = answer;
      deployments = markers;
      draw();
    } catch (error) {
      if (page.current(mine)) {
        page.failed(charts.breakdown, error);
        page.failed(charts.shares, error);
      }
    }
  }

  el("cohort-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-cohort]");
    if (!button) return;
    cohort = button.dataset.cohort;
    page.press(el("cohort-picker"), button);
    if (body) drawShares();
  });

  const again = () => refresh(page.range, page.generation);
  // The percentile and the log scale change nothing here; new shares and deployments do.
  page.panels.push({ refresh, redraw() {}, on: { stage_shares: again, deployments: again, resync: again } });
})();
