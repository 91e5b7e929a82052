/* The pipeline page: one window and percentile picked at the top, and a panel per draw
 * function of each chart the server declares (latencyboard.dashboards.charts), in its order.
 * pipeline/<name>.js, loaded after this file, registers the draw function <name>:
 *
 *   page.draw("name", (chart) => panel)   // chart: { id, url, draws, live }; null: not here
 *
 * A panel is { refresh(range, generation), redraw(), on: { eventType: handler } }: a window
 * change refreshes every panel and a percentile or scale change redraws them. Each live event
 * of the pipeline (live.js) goes to the panels of the charts that declare it, and "resync"
 * (after a reconnect) to every panel of a chart that declares one: to the panel's handler of
 * that event, else to its refresh. A chart's draw function that is not registered is an error.
 *
 * The page's config (ids, stages, objectives, charts) is JSON in #pipeline-config. Every data
 * call asks for the same [start, end): the window laid on whole steps of an epoch-anchored grid,
 * as the APIs lay their buckets, so every chart's buckets line up. The window and percentile
 * live in the URL (?window=7d&percentile=p99), pushed to the history so Back returns to the
 * previous choice and a view can be shared.
 */
(function () {
  "use strict";

  const C = window.LB.charts;
  const cfg = JSON.parse(document.getElementById("pipeline-config").textContent);
  const el = (id) => document.getElementById(id);
  const DEFAULTS = { window: "24h", percentile: "p99" };
  const TRACE_WINDOWS = ["15m", "1h", "6h", "24h"];

  /** The window and percentile a URL asks for, falling back to the defaults. */
  function choiceOf(search) {
    const params = new URLSearchParams(search);
    const window_ = params.get("window");
    const percentile = params.get("percentile");
    return {
      window: cfg.windows.some((w) => w.label === window_) ? window_ : DEFAULTS.window,
      percentile: cfg.percentiles.some((p) => p.key === percentile) ? percentile : DEFAULTS.percentile,
    };
  }

  /** A step as [count, unit, word]: 900 → [15, "m", "minute"]. */
  function stepParts(seconds) {
    if (seconds % 86400 === 0) return [seconds / 86400, "d", "day"];
    if (seconds % 3600 === 0) return [seconds / 3600, "h", "hour"];
    return [seconds / 60, "m", "minute"];
  }

  const rootStages = new Set(cfg.rootStageIds);
  const deploymentsUrl = cfg.charts.find((chart) => chart.id === "deployments").url;
  const page = {
    C,
    cfg,
    el,
    state: { ...choiceOf(window.location.search), log: true },
    colors: C.stageColors(cfg.stages, cfg.endToEnd),
    panels: [],
    draws: {},
    range: null,
    generation: 0, // answers of a window the user has since left are dropped
    deployments: Promise.resolve([]),
    stepParts,

    /** Whether an answer asked for at generation `mine` is still wanted. */
    current(mine) {
      return mine === page.generation;
    },

    /** The x axis of every time chart: the window up to now (its last step is still
     * filling), the same on every chart so that they line up. */
    timeAxis() {
      return {
        type: "date",
        range: [page.range.start, page.range.now],
        title: C.axisTitle("time", "UTC"),
      };
    },

    stageLabel(stage) {
      return rootStages.has(stage.id) ? `${stage.name} (own time)` : stage.name;
    },

    isRootStage(stageId) {
      return rootStages.has(stageId);
    },

    /** Deployment lines and the pipeline's incidents (shaded from opened to resolved, or to
     * now while open) on a time chart: the same marks on every chart sharing the time axis. */
    timeMarks(deployments) {
      const marks = C.deploymentDecorations(deployments);
      const [start, now] = [Date.parse(page.range.start), Date.parse(page.range.now)];
      const shown = cfg.incidents.filter((i) => Date.parse(i.resolvedAt ?? page.range.now) >= start &&
        Date.parse(i.openedAt) <= now);
      return {
        shapes: [...marks.shapes, ...shown.map((i) => ({
          type: "rect", xref: "x", yref: "paper", y0: 0, y1: 1, layer: "below", name: "incident",
          x0: C.utc(Math.max(start, Date.parse(i.openedAt))),
          x1: C.utc(Math.min(now, Date.parse(i.resolvedAt ?? page.range.now))),
          fillcolor: "rgba(180, 35, 24, 0.10)", line: { color: "rgba(180, 35, 24, 0.5)", width: 1 },
        }))],
        annotations: [...marks.annotations, ...shown.map((i) => ({
          x: C.utc(Math.max(start, Date.parse(i.openedAt))), xref: "x", xanchor: "left",
          y: 0, yref: "paper", yanchor: "bottom", showarrow: false, text: "⚠ incident",
          font: { size: 11, color: "#b42318" },
          hovertext: `${i.title}<br>${C.formatTime(i.openedAt)} to ` +
            `${i.resolvedAt ? C.formatTime(i.resolvedAt) : "now (open)"}`,
        }))],
      };
    },

    failed(chart, error) {
      if (chart) C.message(chart, `Could not load this chart: ${error.message}`);
    },

    /** Register the draw function `name`: `make(chart)` gives the chart's panel. */
    draw(name, make) {
      page.draws[name] = make;
    },
  };
  window.LB.pipeline = page;

  /** The window laid on whole steps: it ends at the end of the current step. */
  function currentRange() {
    const choice = cfg.windows.find((w) => w.label === page.state.window);
    const stepMs = choice.step * 1000;
    const now = Date.now();
    const endMs = Math.ceil(now / stepMs) * stepMs;
    return {
      start: new Date(endMs - choice.seconds * 1000).toISOString(),
      end: new Date(endMs).toISOString(),
      now: new Date(now).toISOString(),
      step: choice.step,
      label: choice.label,
    };
  }

  function describeRange(range) {
    const [count, , word] = stepParts(range.step);
    const steps = count === 1 ? `${word} steps` : `${count}-${word} steps`;
    el("window-range").textContent =
      `${C.formatTime(range.start)} to now (${C.formatTime(range.now)}), ${steps}; the last step is still filling`;
  }

  /** The links to the pipeline's other pages carry the window chosen here: its traces (the
   * search keeps windows up to a day) and a comparison of this window with the one before. */
  function updateLinks(range) {
    const traces = el("link-traces");
    if (traces) {
      const url = new URL(traces.href);
      url.searchParams.set("window", TRACE_WINDOWS.includes(range.label) ? range.label : "24h");
      traces.href = url.toString();
    }
    const compare = el("link-compare");
    if (compare) {
      const url = new URL(compare.href);
      const [start, end] = [Date.parse(range.start), Date.parse(range.end)];
      const minute = (ms) => new Date(ms).toISOString().slice(0, 16) + "Z";
      url.searchParams.set("a_start", minute(2 * start - end));
      url.searchParams.set("a_end", minute(start));
      url.searchParams.set("b_start", minute(start));
      url.searchParams.set("b_end", minute(end));
      compare.href = url.toString();
    }
  }

  function fetchDeployments(range) {
    page.deployments = C.getJson(deploymentsUrl, { start: range.start, end: range.end })
      .then((body) => body.markers)
      .catch(() => []);
  }

  async function refresh() {
    const mine = ++page.generation;
    const range = currentRange();
    page.range = range;
    describeRange(range);
    updateLinks(range);
    document.body.classList.add("loading");
    fetchDeployments(range);
    await Promise.all(page.panels.map((panel) => panel.refresh(range, mine)));
    if (page.current(mine)) {
      document.body.classList.remove("loading");
      document.body.dataset.loaded = page.state.window;
    }
  }

  function redraw() {
    for (const panel of page.panels) panel.redraw();
  }

  /** Time moved on while the page stayed open: the same window, up to now (a new step slides
   * it), without refetching what is drawn. */
  function advance() {
    const range = currentRange();
    if (range.end !== page.range.end) {
      updateLinks(range);
      fetchDeployments(range);
    }
    page.range = range;
    describeRange(range);
  }

  /** The panels of every chart the page draws, in the charts' order. */
  function makePanels() {
    for (const chart of cfg.charts) {
      for (const name of chart.draws) {
        const make = page.draws[name];
        if (!make) throw new Error(`No draw function "${name}" for the chart "${chart.id}".`);
        const panel = make(chart);
        if (panel) page.panels.push({ ...panel, chart });
      }
    }
  }

  /** Each live event to the panels of the charts that follow it, once the first load has
   * drawn them. */
  function followLive() {
    if (!window.LatencyboardLive) return;
    const live = window.LatencyboardLive.connect(`/ws/live/pipelines/${cfg.pipeline.id}/`);
    const follows = (panel, type) => (type === "resync" ? panel.chart.live.length > 0 : panel.chart.live.includes(type));
    const types = new Set(page.panels.flatMap((panel) => panel.chart.live));
    if (types.size) types.add("resync");
    for (const type of types) {
      live.addEventListener(type, (event) => {
        if (!page.range) return;
        if (type === "points" || type === "resync") advance();
        for (const panel of page.panels.filter((p) => follows(p, type))) {
          const handler = (panel.on || {})[type] || (() => panel.refresh(page.range, page.generation));
          Promise.resolve(handler(event.detail)).catch((error) => console.warn("live", type, error));
        }
      });
    }
  }

  // --- controls ----------------------------------------------------------------------------

  function press(group, button) {
    for (const other of group.querySelectorAll("button")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
  }
  page.press = press;

  function syncButtons() {
    for (const [id, attr, value] of [
      ["window-picker", "data-window", page.state.window],
      ["percentile-picker", "data-key", page.state.percentile],
    ]) {
      const group = el(id);
      const button = group.querySelector(`button[${attr}="${value}"]`);
      if (button) press(group, button);
    }
  }

  function remember() {
    const query = new URLSearchParams({ window: page.state.window, percentile: page.state.percentile });
    window.history.pushState(null, "", `${window.location.pathname}?${query}${window.location.hash}`);
  }

  el("window-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-window]");
    if (!button || button.dataset.window === page.state.window) return;
    page.state.window = button.dataset.window;
    press(el("window-picker"), button);
    remember();
    refresh();
  });
  el("percentile-picker").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-key]");
    if (!button || button.dataset.key === page.state.percentile) return;
    page.state.percentile = button.dataset.key;
    press(el("percentile-picker"), button);
    remember();
    redraw();
  });
  el("log-scale").addEventListener("change", (event) => {
    page.state.log = event.target.checked;
    redraw();
  });
  window.addEventListener("popstate", () => {
    const choice = choiceOf(window.location.search);
    const windowChanged = choice.window !== page.state.window;
    Object.assign(page.state, choice);
    syncButtons();
    if (windowChanged) refresh();
    else redraw();
  });

  // The draw functions' scripts run after this one; the page starts once they have registered.
  document.addEventListener("DOMContentLoaded", () => {
    makePanels();
    for (const chart of document.querySelectorAll(".chart[id^='chart-']")) C.message(chart, "Loading…");
    syncButtons();
    refresh();
    followLive();
  });
})();
