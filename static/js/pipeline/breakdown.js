/* Pipeline page panel: where the time goes (mean time per stage, all requests and the
 * slowest 1%: the requests above the window's p99), counted as work (self time: parallel spans
 * each count) or along the critical path (only what the request waited for), and how the
 * stage shares, counted the same way, moved over the window (each step's slowest 1% above the
 * step's own p99; steps with too few left out). */
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
  let counting = "work";
  let url = null;
  // The API's fields and the words of each way of counting.
  const COUNTINGS = {
    work: {
      share: "share", mean: "mean_self_ms", axis: "share of work", per: "of work per request", of: "of the work",
      over: "share of self time",
    },
    critical: {
      share: "share_critical", mean: "mean_critical_ms", axis: "share of end-to-end time",
      per: "on the critical path per request", of: "of the end-to-end time", over: "share of critical path",
    },
  };
  const TAIL_MIN = 10; // latencyboard.rollups.tails.MIN_TAIL_REQUESTS

  function drawBreakdown() {
    if (!body.requests) {
      C.message(charts.breakdown, `No requests with a complete stage breakdown in this window. ${NOT_YET}, ` +
        "from requests whose root span and stage spans were all received.");
      return;
    }
    charts.breakdown.dataset.counting = counting;
    if (counting === "critical" && !body.critical_shown) {
      C.message(charts.breakdown, "No critical-path shares for this window: it includes minutes " +
        "whose stage shares were computed before critical paths were recorded. A window of " +
        "later minutes has them.");
      return;
    }
    const words = COUNTINGS[counting];
    const field = (stage, cohortName) => stage[`${words.share}_${cohortName}`];
    const mean = (stage, cohortName) => stage[`${words.mean}_${cohortName}`];
    // The slowest 1% is the requests above the window's p99; a bar of a handful of them would
    // describe those few, not a tail: with too few it is not drawn, and the chart says why.
    const tail = body.tail_shown;
    const rows = [
      ...(tail ? [`slowest 1%<br>${C.formatMs(body.mean_root_ms_tail)} mean`] : []),
      `all requests<br>${C.formatMs(body.mean_root_ms_all)} mean`,
    ];
    const pick = (stage) => (tail
      ? { x: [field(stage, "tail"), field(stage, "all")], mean: [mean(stage, "tail"), mean(stage, "all")] }
      : { x: [field(stage, "all")], mean: [mean(stage, "all")] });
    // Largest share of all requests first, as counted.
    const stages = [...body.stages].sort((a, b) => field(b, "all") - field(a, "all"));
    const traces = stages.map((stage) => ({
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
      hovertemplate: `${page.stageLabel(stage)}: <b>%{customdata[0]}</b> ${words.per}` +
        ` (%{customdata[1]:.1f}% ${words.of})<extra></extra>`,
    }));
    C.draw(charts.breakdown, traces, C.layout({
      barmode: "stack",
      bargap: 0.35,
      // Room above the bars for the two-line note when there is no slowest-1% bar.
      margin: { l: 100, t: tail ? 8 : 40, b: 44 },
      xaxis: { range: [0, 100], title: C.axisTitle(words.axis, "%"), ticksuffix: "%" },
      yaxis: { automargin: true },
      legend: { orientation: "h", y: -0.42, traceorder: "normal" },
      annotations: tail ? [] : [{
        // From the chart's left edge (past the row labels' margin), on two lines: the note
        // fits a phone's screen.
        xref: "paper", x: 0, xanchor: "left", xshift: -92, yref: "paper", y: 1, yanchor: "bottom",
        showarrow: false, align: "left", font: { size: 11, color: C.MUTED },
        text: `No slowest-1% bar: ${C.formatCount(body.tail_requests)} request` +
          `${body.tail_requests === 1 ? "" : "s"} above the window's p99,<br>${TAIL_MIN} needed ` +
          "(about 1,000 requests in the window)",
      }],
    }), `${cfg.pipeline.name}-breakdown`);
    charts.breakdown.dataset.tail = tail ? "shown" : "too-few";
  }

  function drawShares() {
    const series = body.series;
    const words = COUNTINGS[counting];
    const field = `${words.share}_${cohort}`;
    charts.shares.dataset.counting = counting;
    // Buckets without requests have no shares: left out, rather than stacked as zeros.
    const kept = series ? series.buckets.map((_, i) => series.stages.some((s) => s[field][i] !== null)) : [];
    const count = kept.filter(Boolean).length;
    if (!count) {
      C.message(charts.shares, counting === "critical" && body.requests
        ? "No critical-path shares in this window: its stage shares were computed before critical paths were recorded."
        : `No stage shares in this window yet. ${NOT_YET}.`);
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
      yaxis: { range: [0, 100], title: C.axisTitle(words.over, "%"), ticksuffix: "%" },
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
      const answer = await C.getJson(url, {
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

  el("counting-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-counting]");
    if (!button) return;
    counting = button.dataset.counting;
    page.press(el("counting-picker"), button);
    draw();
  });

  el("cohort-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-cohort]");
    if (!button) return;
    cohort = button.dataset.cohort;
    page.press(el("cohort-picker"), button);
    if (body) drawShares();
  });

  // The percentile and the log scale change nothing here.
  page.draw("breakdown", (chart) => {
    url = chart.url;
    return { refresh, redraw() {} };
  });
})();
