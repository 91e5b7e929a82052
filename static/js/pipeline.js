/* The pipeline page: percentiles by stage, stage breakdown, SLA attainment, deployments and the
 * breakdown by attribute, all over one window picked at the top.
 *
 * The page's config (ids, stages, objectives, API URLs) is JSON in #pipeline-config. Every data
 * call asks for the same [start, end): the window laid on whole steps of an epoch-anchored grid,
 * as the APIs lay their buckets, so every chart's buckets line up. The window and percentile
 * live in the URL (?window=7d&percentile=p99) so a view can be shared. A point of the
 * percentiles chart links to the traces of its stage and bucket nearest its percentile.
 */
(function () {
  "use strict";

  const C = window.LB.charts;
  const cfg = JSON.parse(document.getElementById("pipeline-config").textContent);
  const colors = C.stageColors(cfg.stages, cfg.endToEnd);
  const rootStages = new Set(cfg.rootStageIds);
  const el = (id) => document.getElementById(id);
  const charts = {
    percentiles: el("chart-percentiles"),
    breakdown: el("chart-breakdown"),
    shares: el("chart-shares"),
    sla: el("chart-sla"),
    attributes: el("chart-attributes"),
  };

  const params = new URLSearchParams(window.location.search);
  const state = {
    window: cfg.windows.some((w) => w.label === params.get("window")) ? params.get("window") : "24h",
    percentile: cfg.percentiles.some((p) => p.key === params.get("percentile"))
      ? params.get("percentile") : "p99",
    log: true,
    cohort: "all",
    objective: (cfg.objectives.find((o) => o.stage === null) || cfg.objectives[0] || {}).id,
    attribute: null,
  };
  const data = { range: null, percentiles: null, deployments: [], breakdown: null, attributes: null };
  let generation = 0; // answers of a window the user has since left are dropped

  /** The window laid on whole steps: it ends at the end of the current step. */
  function currentRange() {
    const choice = cfg.windows.find((w) => w.label === state.window);
    const stepMs = choice.step * 1000;
    const endMs = Math.ceil(Date.now() / stepMs) * stepMs;
    return {
      start: new Date(endMs - choice.seconds * 1000).toISOString(),
      end: new Date(endMs).toISOString(),
      step: choice.step,
    };
  }

  /** The x axis of every time chart: the whole window, so that the charts line up. */
  function timeAxis() {
    return { type: "date", range: [data.range.start, data.range.end], title: C.axisTitle("time", "UTC") };
  }

  /** A step as [count, unit, word]: 900 → [15, "m", "minute"]. */
  function stepParts(seconds) {
    if (seconds % 86400 === 0) return [seconds / 86400, "d", "day"];
    if (seconds % 3600 === 0) return [seconds / 3600, "h", "hour"];
    return [seconds / 60, "m", "minute"];
  }

  /** The exemplars page of one plotted point: the traces of the stage (null: end to end)
   * whose span, started in the bucket, is nearest the bucket's exact percentile `key`. */
  function exemplarsUrl(stageId, bucketStart, stepSeconds, key) {
    const [count, unit] = stepParts(stepSeconds);
    const query = new URLSearchParams({
      pipeline: cfg.pipeline.id,
      stage: stageId === null ? "e2e" : stageId,
      minute: bucketStart,
      step: `${count}${unit}`,
      near: key,
    });
    return `${cfg.urls.traces}?${query}`;
  }

  function stageLabel(stage) {
    return rootStages.has(stage.id) ? `${stage.name} (own time)` : stage.name;
  }

  // --- percentiles over time ---------------------------------------------------------------

  function drawPercentiles() {
    const body = data.percentiles;
    if (!body) return;
    const key = state.percentile;
    const bound = body.relative_error;
    const traces = body.series
      .filter((series) => series.summary.n > 0)
      .map((series) => {
        const isRoot = rootStages.has(series.stage.id);
        const color = colors[series.stage.id === null ? cfg.endToEnd : series.stage.name];
        return {
          type: "scatter",
          mode: "lines+markers",
          name: series.stage.id === null ? cfg.endToEnd : series.stage.name,
          x: series.points.map((p) => p.t),
          y: series.points.map((p) => p[key]),
          // n, the error bounds, and where a click on the point leads (C.linkPoints)
          customdata: series.points.map((p) => (p[key] === null ? [p.n, null, null, null] : [
            p.n, p[key] * (1 - bound), p[key] * (1 + bound),
            exemplarsUrl(series.stage.id, p.t, body.step_seconds, key),
          ])),
          line: { color, width: series.stage.id === null ? 2.5 : 1.6 },
          marker: { color, size: 4 },
          connectgaps: false,
          // A root span's stage is the end-to-end latency again: off until asked for.
          visible: isRoot ? "legendonly" : true,
          hovertemplate: `%{fullData.name}: <b>%{y:.3~r} ms</b> ${key}` +
            ` (±${(bound * 100).toFixed(0)}%: %{customdata[1]:.3~r}–%{customdata[2]:.3~r} ms),` +
            " n = %{customdata[0]:,}<extra></extra>",
        };
      });
    if (!traces.length) {
      C.message(charts.percentiles, "No spans in this window.");
      return;
    }
    const decorations = C.deploymentDecorations(data.deployments);
    C.draw(charts.percentiles, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 26 },
      // the unified hover's title: the bucket, and what a click does
      xaxis: { ...timeAxis(), hoverformat: `%b %-d %H:%M UTC · click a point: traces near its ${key}` },
      yaxis: C.latencyAxis(
        traces.filter((t) => t.visible === true).flatMap((t) => t.y),
        state.log,
        C.axisTitle(`latency ${key}`, "ms"),
      ),
      shapes: decorations.shapes,
      annotations: decorations.annotations,
    }), `${cfg.pipeline.name}-${key}`).then(() => C.linkPoints(charts.percentiles, 3));
  }

  function drawDeploymentList() {
    const list = el("deployments");
    list.replaceChildren();
    const heading = document.createElement("h3");
    heading.textContent = "Deployments in this window";
    list.append(heading);
    if (!data.deployments.length) {
      const none = document.createElement("p");
      none.className = "muted small";
      none.textContent = "No change of service.version or model.version in this window.";
      list.append(none);
      return;
    }
    const items = document.createElement("ul");
    for (const marker of data.deployments) {
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

  // --- stage breakdown ---------------------------------------------------------------------

  function drawBreakdown() {
    const body = data.breakdown;
    if (!body) return;
    if (!body.requests) {
      C.message(charts.breakdown, "No requests with a complete stage breakdown in this window yet " +
        "(a minute is broken down about two minutes after it ends).");
      C.message(charts.shares, "No stage breakdown in this window yet.");
      return;
    }
    const rows = [
      `slowest 1% · ${C.formatMs(body.mean_root_ms_tail)} mean`,
      `all requests · ${C.formatMs(body.mean_root_ms_all)} mean`,
    ];
    const traces = body.stages.map((stage) => ({
      type: "bar",
      orientation: "h",
      name: stageLabel(stage),
      y: rows,
      x: [stage.share_tail * 100, stage.share_all * 100],
      customdata: [
        [stage.mean_self_ms_tail, stage.share_tail * 100],
        [stage.mean_self_ms_all, stage.share_all * 100],
      ],
      text: [stage.share_tail, stage.share_all].map((s) => (s >= 0.07 ? stage.name : "")),
      textposition: "inside",
      insidetextanchor: "middle",
      textfont: { color: "#fff", size: 11 },
      marker: { color: colors[stage.name], line: { color: "#fff", width: 1 } },
      hovertemplate: `${stageLabel(stage)}: <b>%{customdata[0]:.3~r} ms</b> per request` +
        " (%{customdata[1]:.1f}% of the time)<extra>%{y}</extra>",
    }));
    C.draw(charts.breakdown, traces, C.layout({
      barmode: "stack",
      bargap: 0.35,
      margin: { l: 190, t: 8, b: 44 },
      xaxis: { range: [0, 100], title: C.axisTitle("share of request time", "%"), ticksuffix: "%" },
      yaxis: { automargin: true },
      legend: { orientation: "h", y: -0.42, traceorder: "normal" },
    }), `${cfg.pipeline.name}-breakdown`);
    drawShares();
  }

  function drawShares() {
    const series = data.breakdown && data.breakdown.series;
    if (!series || !data.breakdown.requests) return;
    const field = state.cohort === "tail" ? "share_tail" : "share_all";
    const order = new Map(data.breakdown.stages.map((s, i) => [s.id, i]));
    const stages = [...series.stages].sort((a, b) => (order.get(a.id) ?? 99) - (order.get(b.id) ?? 99));
    // Buckets without requests have no shares: left out, rather than stacked as zeros.
    const kept = series.buckets.map((_, i) => stages.some((stage) => stage[field][i] !== null));
    const traces = stages.map((stage) => ({
      type: "scatter",
      mode: "lines",
      stackgroup: "shares",
      name: stageLabel(stage),
      x: series.buckets.filter((_, i) => kept[i]),
      y: stage[field].filter((_, i) => kept[i]).map((v) => (v ?? 0) * 100),
      line: { width: 0.5, color: colors[stage.name] },
      fillcolor: colors[stage.name],
      hovertemplate: `${stageLabel(stage)}: %{y:.1f}%<extra></extra>`,
    }));
    const decorations = C.deploymentDecorations(data.deployments);
    C.draw(charts.shares, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 26 },
      xaxis: timeAxis(),
      yaxis: { range: [0, 100], title: C.axisTitle("share of self time", "%"), ticksuffix: "%" },
      legend: { traceorder: "normal" },
      shapes: decorations.shapes,
      annotations: decorations.annotations,
    }), `${cfg.pipeline.name}-shares`);
  }

  // --- SLA attainment ----------------------------------------------------------------------

  async function loadSla(range, mine) {
    const objective = cfg.objectives.find((o) => o.id === state.objective);
    if (!objective || !charts.sla) return;
    const body = await C.getJson(objective.attainmentUrl, {
      start: range.start, end: range.end, step: String(range.step),
    });
    if (mine !== generation) return;
    drawBudget(objective, body);
    const target = objective.targetPercent;
    const buckets = body.buckets;
    const counted = buckets.filter((b) => b.total > 0);
    if (!counted.length) {
      C.message(charts.sla, "No requests counted for this objective in this window.");
      return;
    }
    const lowest = Math.min(...counted.map((b) => b.attainment_percent));
    const floor = Math.max(0, Math.min(lowest, target - 2 * (100 - target)));
    const traces = [{
      type: "scatter",
      mode: counted.length > 60 ? "lines" : "lines+markers",
      name: "attainment",
      x: buckets.map((b) => b.start),
      y: buckets.map((b) => b.attainment_percent),
      customdata: buckets.map((b) => [b.good, b.total]),
      line: { color: C.PALETTE[0], width: 2 },
      marker: {
        size: 5,
        color: buckets.map((b) => (b.attainment_percent >= target ? C.PALETTE[0] : "#b42318")),
      },
      hovertemplate: "<b>%{y:.3f}%</b> under " + C.formatMs(objective.thresholdMs) +
        " (%{customdata[0]:,} of %{customdata[1]:,})<extra></extra>",
    }];
    if (body.burn_down) {
      traces.push({
        type: "scatter",
        mode: "lines",
        name: "error budget left, from the window's start",
        x: body.burn_down.map((p) => p.at),
        y: body.burn_down.map((p) => p.remaining_percent),
        yaxis: "y2",
        line: { color: C.MUTED, width: 1.5, dash: "dash" },
        hovertemplate: "budget left: %{y:.1f}%<extra></extra>",
      });
    }
    C.draw(charts.sla, traces, C.layout({
      hovermode: "x unified",
      margin: { t: 12, r: body.burn_down ? 64 : 16 },
      xaxis: timeAxis(),
      yaxis: {
        range: [floor, 100 + (100 - floor) * 0.03],
        title: C.axisTitle("requests within threshold", "%"),
        ticksuffix: "%",
      },
      yaxis2: body.burn_down ? {
        overlaying: "y",
        side: "right",
        range: [Math.min(0, ...body.burn_down.map((p) => p.remaining_percent ?? 0)), 105],
        title: C.axisTitle("error budget left", "%"), ticksuffix: "%", showgrid: false, zeroline: false,
      } : undefined,
      shapes: [{
        type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: target, y1: target,
        line: { color: "#b42318", width: 1.5, dash: "dash" },
      }],
      annotations: [{
        xref: "paper", x: 1, xanchor: "right", yref: "y", y: target, yanchor: "bottom",
        showarrow: false, bgcolor: "rgba(255,255,255,0.8)",
        text: `objective: ${target}% within ${C.formatMs(objective.thresholdMs)}`,
        font: { size: 11, color: "#b42318" },
      }],
    }), `${cfg.pipeline.name}-sla`);
  }

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
    figure(remaining !== null && remaining < 0 ? "error budget left (overspent)" : "error budget left",
      remaining === null ? "–" : `${remaining.toFixed(1)}%`, (remaining ?? 0) > 0 ? "" : "bad");
    figure("slow requests allowed / used",
      `${C.formatCount(Number(summary.allowed_bad))} / ${C.formatCount(summary.bad)}`);
    panel.append(big);
  }

  // --- breakdown by attribute --------------------------------------------------------------

  async function loadAttributes(range, mine) {
    const query = new URLSearchParams({ start: range.start, end: range.end });
    query.set("q", cfg.percentiles.map((p) => p.q).join(","));
    if (state.attribute) query.set("key", state.attribute);
    const body = await C.getJson(cfg.urls.attributes, Object.fromEntries(query));
    if (mine !== generation) return;
    data.attributes = body;
    state.attribute = body.key || null;
    const picker = el("attribute-picker");
    picker.replaceChildren(...body.keys.map((key) => new Option(key, key, false, key === body.key)));
    picker.disabled = !body.keys.length;
    const note = el("attribute-note");
    const hours = cfg.attributeMaxHours;
    let text = `Exact percentiles from raw spans, of the last ${hours} h at most` +
      ` (here ${C.formatTime(body.start)} to now): ${C.formatCount(body.spans_read)} spans read`;
    if (body.capped) {
      text += `, only the newest ${C.formatCount(body.max_spans)}, from ${C.formatTime(body.covered_from)}`;
    }
    text += `. The ${body.max_values} most frequent values are shown.`;
    note.textContent = text;
    drawAttributes();
  }

  function drawAttributes() {
    const body = data.attributes;
    if (!body) return;
    if (!body.groups.length) {
      C.message(charts.attributes, body.key
        ? `No spans carrying ${body.key} in the last ${cfg.attributeMaxHours} h of this window.`
        : "No span attributes in the last day.");
      return;
    }
    const index = body.quantiles.findIndex(
      (q) => Math.abs(q - cfg.percentiles.find((p) => p.key === state.percentile).q) < 1e-9);
    const stageNames = [...new Set(body.groups.map((g) => g.stage.name))];
    const traces = body.values.map((value, i) => {
      const groups = body.groups.filter((g) => g.value === value);
      return {
        type: "bar",
        name: `${body.key} = ${value}`,
        x: groups.map((g) => g.stage.name),
        y: groups.map((g) => g.quantiles_ms[index]),
        customdata: groups.map((g) => [g.n, g.error_rate * 100]),
        marker: { color: C.PALETTE[(i + 4) % C.PALETTE.length] },
        text: groups.map((g) => C.formatMs(g.quantiles_ms[index])),
        textposition: "outside",
        cliponaxis: false,
        hovertemplate: `${body.key} = ${value}<br>%{x}: <b>%{y:.3~r} ms</b> ${state.percentile}` +
          "<br>n = %{customdata[0]:,}, errors %{customdata[1]:.2f}%<extra></extra>",
      };
    });
    C.draw(charts.attributes, traces, C.layout({
      barmode: "group",
      showlegend: true,
      margin: { t: 16 },
      xaxis: {
        type: "category", categoryorder: "array", categoryarray: stageNames, title: C.axisTitle("stage"),
      },
      // Linear even when the line charts are logarithmic: a bar's length is its value.
      yaxis: C.latencyAxis([], false, C.axisTitle(`latency ${state.percentile}`, "ms")),
    }), `${cfg.pipeline.name}-by-${body.key}`);
  }

  // --- loading -----------------------------------------------------------------------------

  function failed(chart, error) {
    if (chart) C.message(chart, `Could not load this chart: ${error.message}`);
  }

  async function loadAll() {
    const mine = ++generation;
    const range = currentRange();
    data.range = range;
    const [count, unit, word] = stepParts(range.step);
    el("window-range").textContent =
      `${C.formatTime(range.start)} – ${C.formatTime(range.end)}, ${count}-${word} steps`;
    document.body.classList.add("loading");
    const window_ = { start: range.start, end: range.end };
    const step = String(range.step);
    const stepLabel = `${count}${unit}`;
    const deploymentsCall = C.getJson(cfg.urls.deployments, window_)
      .then((body) => { if (mine === generation) data.deployments = body.markers; })
      .catch(() => { if (mine === generation) data.deployments = []; });
    const percentilesCall = C.getJson(cfg.urls.percentiles, {
      ...window_, step: stepLabel, q: cfg.percentiles.map((p) => p.q).join(","),
    }).then(async (body) => {
      await deploymentsCall;
      if (mine !== generation) return;
      data.percentiles = body;
      drawPercentiles();
      drawDeploymentList();
    }).catch((error) => failed(charts.percentiles, error));
    const breakdownCall = C.getJson(cfg.urls.breakdown, { ...window_, step })
      .then(async (body) => {
        await deploymentsCall;
        if (mine !== generation) return;
        data.breakdown = body;
        drawBreakdown();
      }).catch((error) => { failed(charts.breakdown, error); failed(charts.shares, error); });
    const slaCall = loadSla(range, mine).catch((error) => failed(charts.sla, error));
    const attributesCall = loadAttributes(range, mine).catch((error) => failed(charts.attributes, error));
    await Promise.all([percentilesCall, breakdownCall, slaCall, attributesCall]);
    if (mine === generation) {
      document.body.classList.remove("loading");
      document.body.dataset.loaded = state.window;
    }
  }

  // --- controls ----------------------------------------------------------------------------

  function press(group, button) {
    for (const other of group.querySelectorAll("button")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
  }

  function remember() {
    const query = new URLSearchParams({ window: state.window, percentile: state.percentile });
    window.history.replaceState(null, "", `${window.location.pathname}?${query}${window.location.hash}`);
  }

  function syncButtons() {
    for (const [id, attr, value] of [
      ["window-picker", "data-window", state.window],
      ["percentile-picker", "data-key", state.percentile],
    ]) {
      const group = el(id);
      const button = group.querySelector(`button[${attr}="${value}"]`);
      if (button) press(group, button);
    }
  }

  el("window-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-window]");
    if (!button || button.dataset.window === state.window) return;
    state.window = button.dataset.window;
    press(el("window-picker"), button);
    remember();
    loadAll();
  });
  el("percentile-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-key]");
    if (!button) return;
    state.percentile = button.dataset.key;
    press(el("percentile-picker"), button);
    remember();
    drawPercentiles();
    drawAttributes();
  });
  el("log-scale").addEventListener("change", (event) => {
    state.log = event.target.checked;
    drawPercentiles();
  });
  el("cohort-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-cohort]");
    if (!button) return;
    state.cohort = button.dataset.cohort;
    press(el("cohort-picker"), button);
    drawShares();
  });
  const objectivePicker = el("objective-picker");
  if (objectivePicker) {
    objectivePicker.value = String(state.objective);
    objectivePicker.addEventListener("change", () => {
      state.objective = Number(objectivePicker.value);
      loadSla(data.range, generation).catch((error) => failed(charts.sla, error));
    });
  }
  el("attribute-picker").addEventListener("change", (event) => {
    state.attribute = event.target.value;
    loadAttributes(data.range, generation).catch((error) => failed(charts.attributes, error));
  });

  for (const chart of Object.values(charts)) {
    if (chart) C.message(chart, "Loading…");
  }
  syncButtons();
  loadAll();
})();
