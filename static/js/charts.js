/* Shared Plotly helpers: latency formatting, axis titles with units, one look for every chart.
 *
 * Plain script, no build step: it defines window.LB.charts. Pages load Plotly first, from
 * {% static 'vendor/plotly.min.js' %} (served locally, the product works offline), then this.
 */
(function () {
  "use strict";

  // Colour-blind-safe (Okabe-Ito, then Tol's muted); end to end is always the dark ink.
  const PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999933",
    "#882255", "#44AA99", "#AA4499", "#117733", "#DDCC77",
  ];
  const INK = "#1d2330";
  const MUTED = "#5b6475";
  const GRID = "#e8ebf0";
  const DEPLOY = "#7c3aed";
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

  /** A latency given in ms, in the unit that reads best, three significant digits or so
   * (as the `ms` template filter): 450 µs, 2.50 ms, 212 ms, 37.75 s, 2.5 min. */
  function formatMs(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    if (value >= 60000) return (value / 60000).toFixed(1) + " min";
    if (value >= 1000) return (value / 1000).toFixed(2) + " s";
    if (value >= 100) return value.toFixed(0) + " ms";
    if (value >= 10) return value.toFixed(1) + " ms";
    if (value >= 1 || value === 0) return value.toFixed(2) + " ms";
    return (value * 1000).toFixed(0) + " µs";
  }

  /** A count with thousands separators. */
  function formatCount(value) {
    return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en-US");
  }

  /** A fraction (0..1) as a percentage with `digits` decimals. */
  function formatShare(value, digits) {
    return value === null || value === undefined ? "–" : (value * 100).toFixed(digits ?? 1) + "%";
  }

  /** A moment as "Nov 21 14:05 UTC" (dashboards run in UTC, as the rollups do). */
  function formatTime(iso) {
    const d = new Date(iso);
    const month = d.toLocaleString("en-US", { month: "short", timeZone: "UTC" });
    const pad = (n) => String(n).padStart(2, "0");
    return `${month} ${d.getUTCDate()} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
  }

  /** An ISO 8601 moment (any offset, "Z" or "+00:00", with or without milliseconds) as the
   * UTC wall clock Plotly plots: Plotly has no time zones, so every chart plots UTC this way
   * and says "UTC" on its axis. */
  function utc(iso) {
    return new Date(typeof iso === "number" ? iso : Date.parse(iso)).toISOString().replace(/Z$/, "");
  }

  /** A round latency for an axis tick: 0.2 ms, 5 ms, 200 ms, 1 s, 2 s. */
  function tickMs(value) {
    const trim = (n) => String(Number(n.toPrecision(3)));
    return value >= 1000 ? `${trim(value / 1000)} s` : `${trim(value)} ms`;
  }

  /** A round step of about range / ticks: 1, 2 or 5 times a power of ten. */
  function niceStep(range, ticks) {
    const raw = range / ticks;
    const magnitude = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((f) => f * magnitude).find((step) => step >= raw);
  }

  /** A latency axis (values in ms): logarithmic with ticks at 1, 2 and 5 times the powers of
   * ten spanning `values` (only the powers of ten when that would crowd it), or linear from
   * zero; each tick carries its unit, so past 10 s they read in seconds. */
  function latencyAxis(values, log, title) {
    const axis = { title, rangemode: "tozero" };
    const shown = values.filter((v) => v !== null && v > 0);
    const highest = shown.length ? Math.max(...shown) : 0;
    if ((!log || !shown.length) && highest < 10000) return { ...axis, type: "linear", ticksuffix: " ms" };
    if (!log || !shown.length) {
      const step = niceStep(highest, 5);
      const ticks = Array.from({ length: Math.floor(highest / step) + 2 }, (_, i) => i * step);
      return { ...axis, type: "linear", tickvals: ticks, ticktext: ticks.map(tickMs) };
    }
    const low = Math.floor(Math.log10(Math.min(...shown)));
    const high = Math.ceil(Math.log10(Math.max(...shown)));
    const steps = high - low > 4 ? [1] : [1, 2, 5];
    const ticks = [];
    for (let exponent = low; exponent <= high; exponent += 1) {
      for (const step of steps) ticks.push(step * 10 ** exponent);
    }
    // From the tick below the lowest value to the tick above the highest: values close
    // together (a first minute of traffic) would otherwise leave the axis without a tick.
    const below = Math.max(...ticks.filter((t) => t <= Math.min(...shown)));
    const above = Math.min(...ticks.filter((t) => t >= highest));
    return {
      title, type: "log", tickvals: ticks, ticktext: ticks.map(tickMs),
      range: [Math.log10(below) - 0.05, Math.log10(above) + 0.05],
    };
  }

  /** A stable colour per stage: by its position among the pipeline's stages. */
  function stageColors(stages, endToEnd) {
    const colors = { [endToEnd]: INK };
    stages.forEach((stage, index) => { colors[stage.name] = PALETTE[index % PALETTE.length]; });
    return colors;
  }

  /** An axis title carrying its unit, e.g. axisTitle("latency", "ms") → "latency (ms)"; a
   * latency axis, whose ticks carry their units, is titled without one. */
  function axisTitle(quantity, unit) {
    return { text: unit ? `${quantity} (${unit})` : quantity, font: { size: 12, color: MUTED } };
  }

  /** The layout every chart starts from; `overrides` are merged one level deep. */
  function layout(overrides) {
    const base = {
      font: { family: FONT, size: 12, color: INK },
      paper_bgcolor: "#fff",
      plot_bgcolor: "#fff",
      margin: { l: 64, r: 16, t: 12, b: 40 },
      hoverlabel: { font: { family: FONT, size: 12 }, align: "left" },
      legend: { orientation: "h", y: -0.18, x: 0, font: { size: 12 } },
      xaxis: { gridcolor: GRID, linecolor: GRID, zeroline: false, automargin: true },
      yaxis: { gridcolor: GRID, linecolor: GRID, zeroline: false, automargin: true },
    };
    const merged = { ...base };
    for (const [key, value] of Object.entries(overrides || {})) {
      merged[key] = value && typeof value === "object" && !Array.isArray(value) && base[key]
        ? { ...base[key], ...value }
        : value;
    }
    return merged;
  }

  /** Plotly config: responsive, no logo, a small mode bar, PNG export named after the chart. */
  function config(name) {
    return {
      responsive: true,
      displaylogo: false,
      modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
      toImageButtonOptions: { filename: name || "latencyboard" },
    };
  }

  /** Vertical dotted lines and labels at deployment markers ("appeared" only: a rollout
   * ends a version and starts another, one line is enough). Past `maxLabels` markers the
   * labels become a small diamond, still with the details on hover. */
  function deploymentDecorations(markers, maxLabels) {
    const shown = markers.filter((m) => m.kind === "appeared");
    const labelled = shown.length <= (maxLabels ?? 8);
    return {
      shapes: shown.map((m) => ({
        type: "line", xref: "x", yref: "paper", x0: utc(m.at), x1: utc(m.at), y0: 0, y1: 1,
        line: { color: DEPLOY, width: 1, dash: "dot" }, layer: "below",
      })),
      annotations: shown.map((m) => ({
        x: utc(m.at), xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false,
        text: labelled ? m.value : "◆", font: { size: 11, color: DEPLOY },
        hovertext: `${m.attribute}: ${m.previous} → ${m.value}<br>${formatTime(m.at)}`,
      })),
    };
  }

  /** When data starts well after a window does (more than a tenth of it later), a shade over
   * the empty part and "data since …": most of the chart is blank, and it says why. Null
   * otherwise. Times in ms since the epoch. */
  function dataSince(first, start, end) {
    if (first === null || (first - start) / (end - start) < 0.1) return null;
    return {
      at: utc(first),
      shape: {
        type: "rect", xref: "x", yref: "paper", x0: utc(start), x1: utc(first), y0: 0, y1: 1,
        fillcolor: "rgba(91, 100, 117, 0.06)", line: { width: 0 }, layer: "below",
      },
      annotation: {
        x: utc(first), xref: "x", xanchor: "right", y: 0.5, yref: "paper", showarrow: false,
        text: `no data before · data since ${formatTime(first)}`, font: { size: 12, color: MUTED },
      },
    };
  }

  /** Replace a chart's content with a short message (no data, an error). */
  function message(element, text) {
    if (window.Plotly) Plotly.purge(element);
    delete element.dataset.zoomWatched; // the purge dropped the listener
    element.classList.add("is-empty");
    element.textContent = text;
  }

  // Plotly turns <a href> in any text it draws (trace names, hover, tick labels, annotations)
  // into a link, and stage, pipeline and attribute names come from the spans teams send.
  const LINK_TAG = /<(\/?a)(?=[\s/>]|$)/gi;

  /** `value` (a string, or arrays and plain objects of them, deeply) with every link tag
   * written as text ("&lt;a href=…"), which Plotly shows as it reads, never as a link. The
   * product's own labels use no links; their <b> and <br> stay markup. */
  function withoutLinks(value) {
    if (typeof value === "string") return value.replace(LINK_TAG, "&lt;$1");
    if (Array.isArray(value)) return value.map(withoutLinks);
    if (value && Object.getPrototypeOf(value) === Object.prototype) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withoutLinks(item)]));
    }
    return value;
  }

  /** Draw (or redraw) a chart, clearing a message left there. On a narrow chart (a phone)
   * fewer date ticks, so that they stay level instead of turning onto the axis title, and a
   * legend below the plot placed at the chart's foot, where it makes room for itself (one
   * placed a fraction of the plot below it lies over the ticks and the axis title once it
   * wraps onto several lines). */
  function draw(element, traces, chartLayout, name) {
    if (element.classList.contains("is-empty")) {
      element.classList.remove("is-empty");
      element.textContent = "";
    }
    const narrow = element.clientWidth > 0 && element.clientWidth < 600;
    let shown = chartLayout;
    if (narrow && chartLayout.xaxis && chartLayout.xaxis.type === "date") {
      shown = { ...shown, xaxis: { nticks: 3, tickangle: 0, ...shown.xaxis } };
    }
    if (narrow && shown.legend && shown.legend.orientation === "h" && shown.legend.y < 0) {
      shown = { ...shown, legend: { ...shown.legend, yref: "container", y: 0, yanchor: "bottom" } };
    }
    return Plotly.react(element, withoutLinks(traces), withoutLinks(shown), config(name));
  }

  /** Remember whether the user zoomed or panned `element`, and where they hover (listen once
   * per chart element; Plotly.react keeps the listeners). Live updates then keep both. */
  function watchZoom(element) {
    if (element.dataset.zoomWatched) return;
    element.dataset.zoomWatched = "true";
    element.zoomed = {};
    element.hovered = null;
    element.on("plotly_hover", (hover) => {
      const point = hover.points[0];
      element.hovered = point ? { curve: point.curveNumber, x: element.data[point.curveNumber].x[point.pointIndex] } : null;
    });
    element.on("plotly_unhover", () => { element.hovered = null; });
    element.on("plotly_relayout", (change) => {
      for (const axis of ["xaxis", "yaxis"]) {
        if (change[`${axis}.autorange`]) element.zoomed[axis] = false;
        else if (change[`${axis}.range`] || change[`${axis}.range[0]`] !== undefined) element.zoomed[axis] = true;
      }
    });
  }

  /** Redraw a chart with new data while keeping what the user did to it: the hover label,
   * the ranges they zoomed to (Plotly's `uirevision` alone keeps them only while the layout's own range
   * stays the same, and a live chart's window moves) and, through `uirevision`, the legend
   * entries they hid. A new `revision` (another window) starts afresh. */
  function drawKeepingView(element, traces, chartLayout, name, revision) {
    const zoomed = element.zoomed || {};
    const kept = { ...chartLayout, uirevision: revision };
    for (const axis of ["xaxis", "yaxis"]) {
      if (zoomed[axis] && element.layout && element.layout[axis]) {
        kept[axis] = { ...chartLayout[axis], range: [...element.layout[axis].range], autorange: false };
      }
    }
    const hovered = element.hovered;
    return draw(element, traces, kept, name).then(() => {
      watchZoom(element);
      // A redraw drops the hover label: put it back on the point it was on.
      const trace = hovered && element.data[hovered.curve];
      const index = trace ? Array.from(trace.x).indexOf(hovered.x) : -1;
      if (index >= 0) Plotly.Fx.hover(element, [{ curveNumber: hovered.curve, pointNumber: index }]);
    });
  }

  /** Forget a chart's zoom (the window changed: the user's ranges are of another one). */
  function resetZoom(element) {
    element.zoomed = {};
  }

  /** Make a chart's points links: a click follows the URL at `customdata[index]` of the point
   * clicked (with a unified hover, of the line nearest the pointer at that x); Ctrl/⌘-click
   * opens it in a new tab. Call after each draw: a purge drops Plotly's listeners. */
  function linkPoints(element, index) {
    element.removeAllListeners("plotly_click");
    element.on("plotly_click", (click) => {
      const pointerY = click.event.clientY;
      const distance = (p) => Math.abs((p.bbox.y0 + p.bbox.y1) / 2 - pointerY);
      const linked = click.points.filter((p) => p.customdata && p.customdata[index]);
      if (!linked.length) return;
      const href = linked.reduce((a, b) => (distance(b) < distance(a) ? b : a)).customdata[index];
      if (click.event.ctrlKey || click.event.metaKey) window.open(href, "_blank", "noopener");
      else window.location.assign(href);
    });
  }

  /** How often, and after how long at most, a busy answer is asked again. */
  const BUSY_RETRIES = 5;
  const BUSY_WAIT_MAX_S = 10;

  /** Seconds a 429 or 503 asks to wait (its Retry-After), or null for any other answer. */
  function busyFor(response) {
    if (response.status !== 429 && response.status !== 503) return null;
    const seconds = Number(response.headers.get("Retry-After"));
    return response.headers.has("Retry-After") && Number.isFinite(seconds) && seconds >= 0
      ? Math.min(seconds, BUSY_WAIT_MAX_S) : null;
  }

  /** GET JSON with the session cookie; throws with the API's detail on an error status. A
   * team's heavy reads are served a few at a time, so a page's charts may be told to come
   * back (429 or 503 with Retry-After): they ask again after the wait named, up to
   * BUSY_RETRIES times, before the error is shown. */
  async function getJson(url, params) {
    const query = new URLSearchParams(params || {});
    for (let attempt = 0; ; attempt += 1) {
      const response = await fetch(`${url}?${query}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const wait = busyFor(response);
      if (wait !== null && attempt < BUSY_RETRIES) {
        await new Promise((resolve) => setTimeout(resolve, wait * 1000));
        continue;
      }
      if (!response.ok) {
        let detail = response.statusText;
        try { detail = JSON.stringify(await response.json()); } catch (_) { /* not JSON */ }
        throw new Error(`${response.status} ${detail}`);
      }
      return response.json();
    }
  }

  window.LB = window.LB || {};
  window.LB.charts = {
    PALETTE, INK, MUTED, GRID, DEPLOY,
    formatMs, formatCount, formatShare, formatTime, utc, tickMs, niceStep, latencyAxis, stageColors, axisTitle,
    layout, config, withoutLinks,
    deploymentDecorations, dataSince, message, draw, drawKeepingView, resetZoom, linkPoints, getJson,
  };
})();
