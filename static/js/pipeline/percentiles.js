/* Pipeline page panel: latency by stage over time, at the chosen percentile, with the
 * deployments of the window. A point links to the traces of its stage and bucket nearest its
 * percentile. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el, state } = page;
  const chart = el("chart-percentiles");
  let body = null;
  let deployments = [];
  let drawnWindow = null;
  const CATCH_UP_SLACK_MS = 5 * 60 * 1000;

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

  function draw() {
    if (!body) return Promise.resolve();
    const key = state.percentile;
    const bound = body.relative_error;
    const traces = body.series
      .filter((series) => series.points.some((p) => p[key] !== null))
      .map((series) => {
        const name = series.stage.id === null ? cfg.endToEnd : series.stage.name;
        const color = page.colors[name];
        return {
          type: "scatter",
          mode: "lines+markers",
          name,
          x: series.points.map((p) => p.t),
          y: series.points.map((p) => p[key]),
          // the value and its error bounds as read, n, and where a click leads (C.linkPoints)
          customdata: series.points.map((p) => (p[key] === null ? [p.n, null, null, null] : [
            p.n, `${C.formatMs(p[key] * (1 - bound))}–${C.formatMs(p[key] * (1 + bound))}`,
            C.formatMs(p[key]), exemplarsUrl(series.stage.id, p.t, body.step_seconds, key),
          ])),
          line: { color, width: series.stage.id === null ? 2.5 : 1.6 },
          marker: { color, size: 4 },
          connectgaps: false,
          // A root span's stage is the end-to-end latency again: off until asked for.
          visible: page.isRootStage(series.stage.id) ? "legendonly" : true,
          hovertemplate: `%{fullData.name}: <b>%{customdata[2]}</b> ${key}` +
            ` (±${(bound * 100).toFixed(0)}%: %{customdata[1]}), n = %{customdata[0]:,}<extra></extra>`,
        };
      });
    if (!traces.length) {
      C.message(chart, "No spans in this window: nothing was received from this pipeline " +
        "between its start and now. Pick a longer window, or check that the service sends traces.");
      return Promise.resolve();
    }
    const decorations = C.deploymentDecorations(deployments);
    return C.drawKeepingView(chart, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 26 },
      // the unified hover's title: the bucket, and what a click does
      xaxis: { ...page.timeAxis(), hoverformat: `%b %-d %H:%M UTC · click a point: traces near its ${key}` },
      yaxis: C.latencyAxis(
        traces.filter((t) => t.visible === true).flatMap((t) => t.y),
        state.log,
        C.axisTitle(`latency ${key}`),
      ),
      shapes: decorations.shapes,
      annotations: decorations.annotations,
    }), `${cfg.pipeline.name}-${key}`, page.range.label).then(() => C.linkPoints(chart, 3));
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
    return C.getJson(cfg.urls.percentiles, {
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

  page.panels.push({
    refresh,
    redraw: draw,
    on: {
      points: (event) => live(event),
      resync: catchUp,
      deployments: () => refresh(page.range, page.generation),
    },
  });
})();
