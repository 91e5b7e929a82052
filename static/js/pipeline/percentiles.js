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
    if (!body) return;
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
      return;
    }
    const decorations = C.deploymentDecorations(deployments);
    C.draw(chart, traces, C.layout({
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
    }), `${cfg.pipeline.name}-${key}`).then(() => C.linkPoints(chart, 3));
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

  async function refresh(range, mine) {
    const [count, unit] = page.stepParts(range.step);
    try {
      const answer = await C.getJson(cfg.urls.percentiles, {
        start: range.start, end: range.end, step: `${count}${unit}`,
        q: cfg.percentiles.map((p) => p.q).join(","),
      });
      const markers = await page.deployments;
      if (!page.current(mine)) return;
      body = answer;
      deployments = markers;
      draw();
      drawDeploymentList();
    } catch (error) {
      if (page.current(mine)) page.failed(chart, error);
    }
  }

  page.panels.push({ refresh, redraw: draw });
})();
