/* Pipeline page panel: latency by stage over time, at the chosen percentile, with the
 * deployments of the window. A point links to the traces of its stage and bucket nearest its
 * percentile. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el, state } = page;
  const chart = el("chart-percentiles");
  const red = el("chart-red");
  let body = null;
  let deployments = [];
  let drawnWindow = null;
  let url = null;
  const CATCH_UP_SLACK_MS = 5 * 60 * 1000;
  const SLO_COLOR = "#b42318";

  /** The exemplars page of one plotted point: the traces of the stage (null: end to end)
   * whose span, started in the bucket, is nearest the bucket's exact percentile `key`. */
  function exemplarsUrl(stageId, bucketStart, stepSeconds, key) {
    const [count, unit] = page.stepParts(stepSeconds);
    const query = new URLSearchParams({
      pipeline: cfg.pipeline.id,
      stage: stageId === null ? cfg.endToEnd : stageId,
      minute: bucketStart,
      step: `${count}${unit}`,
      near: key,
    });
    return `${cfg.urls.traces}?${query}`;
  }

  /** Why a point of `n` spans is too thin for quantile `q`, or "" when it is not: fewer
   * than cfg.thinBelow of them above it (n · (1 − q) < 10: a p99 needs 1,000 spans, a p50
   * 20), the point says more about those few spans than about the percentile. */
  function thinness(n, q) {
    const above = n * (1 - q);
    if (!n || above >= cfg.thinBelow) return "";
    return `<br><i>thin: ${C.formatCount(n)} spans, ${above < 1 ? "under 1" : Math.floor(above)}` +
      ` above the ${state.percentile}; ${cfg.thinBelow} needed</i>`;
  }

  /** Request rate and error rate of the window, end to end (the root spans' counts of the
   * same answer), on the latency chart's time axis, with the same marks: the RED trio. */
  function drawRed() {
    const total = body.series.find((series) => series.stage.id === null);
    if (!total || !total.points.some((p) => p.n > 0)) {
      C.message(red, "No requests in this window.");
      return;
    }
    const x = total.points.map((p) => p.t);
    const marks = page.timeMarks(deployments);
    C.draw(red, [
      {
        type: "scatter", mode: "lines", name: "requests", x, line: { color: C.INK, width: 1.6 },
        y: total.points.map((p) => p.n / body.step_seconds),
        customdata: total.points.map((p) => C.formatCount(p.n)),
        hovertemplate: "%{y:.3g} requests/s (%{customdata} in the step)<extra></extra>",
      },
      {
        type: "scatter", mode: "lines", name: "errors", x, yaxis: "y2", line: { color: "#b42318", width: 1.6 },
        y: total.points.map((p) => (p.n ? p.error_rate * 100 : null)),
        customdata: total.points.map((p) => C.formatCount(p.n * p.error_rate)),
        hovertemplate: "%{y:.2f}% errors (%{customdata} requests)<extra></extra>",
        connectgaps: false,
      },
    ], C.layout({
      hovermode: "x unified",
      margin: { t: 16 },
      showlegend: false,
      grid: { rows: 2, columns: 1, subplots: [["xy"], ["xy2"]], roworder: "top to bottom" },
      xaxis: page.timeAxis(),
      yaxis: { domain: [0.55, 1], title: C.axisTitle("requests", "/s"), rangemode: "tozero" },
      yaxis2: { domain: [0, 0.4], title: C.axisTitle("errors", "%"), rangemode: "tozero", ticksuffix: "%" },
      shapes: marks.shapes,
      annotations: marks.annotations,
    }), `${cfg.pipeline.name}-requests-errors`);
  }

  function draw() {
    if (!body) return Promise.resolve();
    drawRed();
    const key = state.percentile;
    const q = cfg.percentiles.find((p) => p.key === key).q;
    const bound = body.relative_error;
    let thinPoints = 0;
    const traces = body.series
      .filter((series) => series.points.some((p) => p[key] !== null))
      .map((series) => {
        const name = series.stage.id === null ? cfg.endToEnd : series.stage.name;
        const color = page.colors[name];
        const thin = series.points.map((p) => (p[key] === null ? "" : thinness(p.n, q)));
        const visible = page.isRootStage(series.stage.id) ? "legendonly" : true;
        if (visible === true) thinPoints += thin.filter(Boolean).length;
        return {
          type: "scatter",
          mode: "lines+markers",
          name,
          x: series.points.map((p) => p.t),
          y: series.points.map((p) => p[key]),
          // the value and its error bounds as read, n, where a click leads (C.linkPoints),
          // and why the point is thin, if it is
          customdata: series.points.map((p, i) => (p[key] === null ? [p.n, null, null, null, ""] : [
            p.n, `${C.formatMs(p[key] * (1 - bound))}–${C.formatMs(p[key] * (1 + bound))}`,
            C.formatMs(p[key]), exemplarsUrl(series.stage.id, p.t, body.step_seconds, key), thin[i],
          ])),
          line: { color, width: series.stage.id === null ? 2.5 : 1.6 },
          // A thin point is drawn hollow and faded: it is there, but not to be read like the rest.
          marker: {
            color, size: thin.map((t) => (t ? 6 : 4)),
            symbol: thin.map((t) => (t ? "circle-open" : "circle")),
            opacity: thin.map((t) => (t ? 0.45 : 1)),
          },
          connectgaps: false,
          // A root span's stage is the end-to-end latency again: off until asked for.
          visible,
          hovertemplate: `%{fullData.name}: <b>%{customdata[2]}</b> ${key}` +
            ` (±${(bound * 100).toFixed(0)}%: %{customdata[1]}), n = %{customdata[0]:,}%{customdata[4]}<extra></extra>`,
        };
      });
    chart.dataset.thinPoints = String(thinPoints);
    if (!traces.length) {
      C.message(chart, "No spans in this window: nothing was received from this pipeline " +
        "between its start and now. Pick a longer window, or check that the service sends traces.");
      return Promise.resolve();
    }
    const marks = page.timeMarks(deployments);
    const slo = sloLines(traces);
    const since = dataSince();
    chart.dataset.dataSince = since ? since.at : "";
    return C.drawKeepingView(chart, [...traces, ...slo], C.layout({
      hovermode: "x unified",
      margin: { t: 26 },
      // the unified hover's title: the bucket, and what a click does
      xaxis: { ...page.timeAxis(), hoverformat: `%b %-d %H:%M UTC · click a point: traces near its ${key}` },
      yaxis: C.latencyAxis(
        [...traces.filter((t) => t.visible === true).flatMap((t) => t.y), ...slo.flatMap((t) => t.y)],
        state.log,
        C.axisTitle(`latency ${key}`),
      ),
      shapes: [...marks.shapes, ...(since ? [since.shape] : [])],
      annotations: [...marks.annotations, ...(since ? [since.annotation] : [])],
    }), `${cfg.pipeline.name}-${key}`, page.range.label).then(() => C.linkPoints(chart, 3));
  }

  /** Each objective's threshold as a dashed line across the window, where its stage (or end
   * to end) is drawn: the latency a percentile above it breaks. A trace, not a shape, so that
   * it sits right on a log axis and says in the legend what it is. */
  function sloLines(traces) {
    const drawn = new Set(traces.map((t) => t.name));
    const objectives = cfg.objectives.filter((o) => drawn.has(o.stage ?? cfg.endToEnd));
    return objectives.map((o) => ({
      type: "scatter", mode: "lines", name: `SLO: ${o.targetPercent}% of ${o.stage ?? cfg.endToEnd} under ${C.formatMs(o.thresholdMs)}`,
      x: [C.utc(page.range.start), C.utc(page.range.now)], y: [o.thresholdMs, o.thresholdMs],
      line: { color: SLO_COLOR, width: 1.5, dash: "dash" }, hoverinfo: "skip", meta: "slo",
    }));
  }

  /** Where a long window's data starts, when it starts well after the window does. */
  function dataSince() {
    const firsts = body.series.flatMap((s) => s.points.filter((p) => p.n > 0).slice(0, 1).map((p) => Date.parse(p.t)));
    return C.dataSince(firsts.length ? Math.min(...firsts) : null, Date.parse(page.range.start), Date.parse(page.range.now));
  }

  function drawDeploymentList() {
    const list = el("deployments");
    list.replaceChildren();
    const heading = document.createElement("h3");
    heading.textContent = "Deployments in this window";
    list.append(heading);
    if (!deployments.length) {
      const none = document.createElement("p");
      none.className = "muted small";
      none.textContent = "No change of service.version or model.version in this window.";
      list.append(none);
      return;
    }
    const items = document.createElement("ul");
    for (const marker of deployments) {
      const item = document.createElement("li");
      const when = document.createElement("time");
      when.dateTime = marker.at;
      when.textContent = C.formatTime(marker.at);
      const what = document.createElement("span");
      what.textContent = marker.kind === "appeared"
        ? ` ${marker.attribute} ${marker.previous} → ${marker.value}`
        : ` ${marker.attribute} ${marker.value} no longer seen`;
      item.className = marker.kind;
      item.append(when, what);
      items.append(item);
    }
    list.append(items);
  }

  function fetchSeries(start, end, step) {
    const [count, unit] = page.stepParts(step);
    return C.getJson(url, {
      start, end, step: `${count}${unit}`, q: cfg.percentiles.map((p) => p.q).join(","),
    });
  }

  /** Lay `answer`'s points (a percentiles answer, or a live event's minutes) over those drawn:
   * a bucket drawn already is replaced (its minute got more spans), a new one added, and
   * buckets the window has slid past are dropped. Timestamps compare as moments, whatever
   * their ISO spelling. */
  function merge(answer) {
    const startMs = Date.parse(page.range.start);
    const drawn = new Map(body.series.map((series) => [series.stage.id, series]));
    for (const fresh of answer.series) {
      let series = drawn.get(fresh.stage.id);
      if (!series) {
        series = { stage: fresh.stage, points: [] };
        body.series.push(series);
      }
      const points = new Map(series.points.map((p) => [Date.parse(p.t), p]));
      for (const point of fresh.points) points.set(Date.parse(point.t), point);
      series.points = [...points.entries()]
        .filter(([at]) => at >= startMs)
        .sort(([a], [b]) => a - b)
        .map(([, point]) => point);
    }
  }

  /** Record when a live update was drawn, and the end-to-end count of each minute it drew:
   * what the live benchmark and the browser tests read (performance marks cost nothing
   * until read). */
  function markDrawn(answer) {
    const endToEnd = answer.series.find((series) => series.stage.id === null);
    const counts = Object.fromEntries((endToEnd ? endToEnd.points : []).map((p) => [new Date(Date.parse(p.t)).toISOString(), p.n]));
    performance.mark("latencyboard.live-draw", { detail: counts });
    chart.dataset.liveDrawn = String(Date.now());
  }

  /** New minutes from a live event: laid over the chart at once when the window's steps are
   * minutes (the event's own resolution); else the steps they fall in fetched again. */
  async function live(event) {
    if (!body) return;
    const range = page.range;
    const mine = page.generation;
    const times = event.series.flatMap((series) => series.points.map((p) => Date.parse(p.t)));
    if (!times.length) return;
    let answer = event;
    if (range.step !== 60) {
      const stepMs = range.step * 1000;
      const from = Math.max(Date.parse(range.start), Math.floor(Math.min(...times) / stepMs) * stepMs);
      answer = await fetchSeries(new Date(from).toISOString(), range.end, range.step);
      if (!page.current(mine)) return;
    }
    merge(answer);
    await draw();
    markDrawn(answer);
  }

  /** After a reconnect: fetch again from the last step drawn (and CATCH_UP_SLACK_MS before
   * it, for spans that arrived late for earlier minutes), so that the minutes folded while the
   * page was not listening leave no gap. */
  async function catchUp() {
    if (!body) return;
    const range = page.range;
    const mine = page.generation;
    const stepMs = range.step * 1000;
    const drawn = body.series.flatMap((series) => series.points.filter((p) => p.n).map((p) => Date.parse(p.t)));
    const last = drawn.length ? Math.max(...drawn) : Date.parse(range.start);
    const from = Math.max(Date.parse(range.start), Math.floor((last - CATCH_UP_SLACK_MS) / stepMs) * stepMs);
    const answer = await fetchSeries(new Date(from).toISOString(), range.end, range.step);
    if (!page.current(mine)) return;
    merge(answer);
    await draw();
    markDrawn(answer);
  }

  async function refresh(range, mine) {
    try {
      const answer = await fetchSeries(range.start, range.end, range.step);
      const markers = await page.deployments;
      if (!page.current(mine)) return;
      // The user's zoom is of a window; the same window fetched again keeps it.
      if (range.label !== drawnWindow) C.resetZoom(chart);
      drawnWindow = range.label;
      body = answer;
      deployments = markers;
      draw();
      drawDeploymentList();
    } catch (error) {
      if (page.current(mine)) page.failed(chart, error);
    }
  }

  page.draw("percentiles", (chart) => {
    url = chart.url;
    return { refresh, redraw: draw, on: { points: (event) => live(event), resync: catchUp } };
  });
})();
