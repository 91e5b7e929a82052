/* The compare page: reads the form, asks /api/compare/, draws the quantiles side by side and
 * the verdict table. The page URL carries the API's own query parameters, so a comparison is
 * a link; with a complete set the page runs it on load.
 *
 * Needs Plotly and charts.js (window.LB.charts) loaded first.
 */
(function () {
  "use strict";

  const C = window.LB.charts;
  const config = JSON.parse(document.getElementById("compare-config").textContent);
  const form = document.getElementById("compare-form");
  if (!form) return; // no pipeline to compare

  const FIELDS = {
    windows: ["a_start", "a_end", "b_start", "b_end"],
    attribute: ["start", "end", "attr", "a", "b"],
  };
  const TIME_FIELDS = new Set(["a_start", "a_end", "b_start", "b_end", "start", "end"]);
  const HOUR = 3600e3;
  const COLORS = { a: "#9aa3b2", slower: "#b42318", faster: "#1a7f37", none: "#2f5bd3", not_enough_data: "#c3c8d2" };
  const LEGEND_WORDS = {
    slower: "slower", faster: "faster", none: "no significant change", not_enough_data: "not enough data",
  };
  const CHANGE_WORDS = { slower: "significantly slower", faster: "significantly faster", none: "no significant change", not_enough_data: "not enough data" };

  const modeButtons = form.querySelectorAll("#mode-picker button");
  const status = document.getElementById("status");
  const errors = document.getElementById("form-errors");
  const result = document.getElementById("result");
  const chart = document.getElementById("chart-compare");
  let mode = "windows";

  // The time inputs are text holding UTC wall time, 24-hour ("2026-11-20 12:00"): a
  // datetime-local input would follow the browser's locale (AM/PM in en-US). The API takes ISO.
  const toInput = (date) => date.toISOString().slice(0, 16).replace("T", " ");
  const toIso = (value) => `${value.replace(" ", "T")}:00Z`;
  const field = (name) => form.elements.namedItem(name);

  function setMode(next) {
    mode = next;
    modeButtons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.mode === next)));
    form.querySelectorAll("fieldset.mode").forEach((set) => { set.hidden = set.dataset.mode !== next; });
  }

  function setWindows(bEnd, length, gap) {
    field("b_end").value = toInput(bEnd);
    field("b_start").value = toInput(new Date(bEnd - length));
    field("a_end").value = toInput(new Date(bEnd - gap));
    field("a_start").value = toInput(new Date(bEnd - gap - length));
  }

  const PRESETS = {
    hour: [HOUR, HOUR],
    day: [24 * HOUR, 24 * HOUR],
    week: [24 * HOUR, 7 * 24 * HOUR],
  };

  function fillDefaults() {
    const now = new Date(config.now);
    setWindows(now, ...PRESETS.day);
    field("start").value = toInput(new Date(now - 24 * HOUR));
    field("end").value = toInput(now);
    field("attr").value = config.attributes[0];
  }

  /** Fill the form from the page URL; true when it holds a complete comparison. */
  function fillFromUrl() {
    const query = new URLSearchParams(window.location.search);
    if (query.has("pipeline")) field("pipeline").value = query.get("pipeline");
    const next = FIELDS.attribute.some((name) => query.has(name) && !TIME_FIELDS.has(name)) ? "attribute" : "windows";
    setMode(next);
    let complete = query.has("pipeline");
    for (const name of FIELDS[next]) {
      const value = query.get(name);
      if (value === null || value === "") { complete = false; continue; }
      const date = TIME_FIELDS.has(name) ? new Date(value) : null;
      field(name).value = date ? (Number.isNaN(date.valueOf()) ? "" : toInput(date)) : value;
    }
    return complete;
  }

  function params() {
    const query = new URLSearchParams({ pipeline: field("pipeline").value });
    for (const name of FIELDS[mode]) {
      const value = field(name).value.trim();
      query.set(name, value && TIME_FIELDS.has(name) ? toIso(value) : value);
    }
    return query;
  }

  function showErrors(byField) {
    errors.replaceChildren();
    form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
    for (const [name, messages] of Object.entries(byField)) {
      const input = field(name);
      if (input) input.setAttribute("aria-invalid", "true");
      const label = name === "non_field_errors" || name === "detail" ? "" : `${name}: `;
      for (const message of [].concat(messages)) {
        const item = document.createElement("li");
        item.textContent = label + message;
        errors.append(item);
      }
    }
  }

  async function run() {
    const query = params();
    window.history.replaceState(null, "", `?${query}`);
    showErrors({});
    status.textContent = "Comparing…";
    form.querySelector("button[type=submit]").disabled = true;
    try {
      const response = await fetch(`${config.api}?${query}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const body = await response.json().catch(() => ({ detail: response.statusText }));
      if (!response.ok) {
        result.hidden = true;
        showErrors(response.status === 404 ? { detail: "No such pipeline in your teams." } : body);
        status.textContent = "";
        return;
      }
      render(body);
      status.textContent = "";
    } catch (error) {
      showErrors({ detail: `The comparison failed: ${error.message}` });
      status.textContent = "";
    } finally {
      form.querySelector("button[type=submit]").disabled = false;
    }
  }

  // --- result -----------------------------------------------------------------------------

  function sideLabel(data, key) {
    const side = data[key];
    if (data.mode === "attribute") return `${data.attribute} = ${side.value}`;
    return `${C.formatTime(side.start)} – ${C.formatTime(side.end)}`;
  }

  /** What one side counts, in the table's unit: requests (its end-to-end spans), every one
   * of them, then the spans of all stages together. */
  function sampleWords(data, side) {
    const total = data.stages.find((s) => s.stage.id === null);
    const requests = total ? `${C.formatCount(total[`n_${side}`])} requests, ` : "";
    return `${requests}every span counted (${C.formatCount(data[side].spans)} in all stages)`;
  }

  function render(data) {
    result.hidden = false;
    const headline = document.getElementById("headline");
    headline.textContent = data.headline;
    // An LLM pipeline: how much of the change is longer answers, how much slower tokens.
    const split = document.getElementById("length-split");
    split.hidden = !data.length;
    split.querySelector("span").textContent = data.length ? data.length.sentence : "";
    const changes = new Set(data.stages.map((s) => s.change));
    headline.className = "headline " + (changes.has("slower") ? "slower" : changes.has("faster") ? "faster" : "");
    document.getElementById("sample-note").textContent =
      `A: ${sideLabel(data, "a")}, ${sampleWords(data, "a")} · B: ${sideLabel(data, "b")}, ${sampleWords(data, "b")}.`;
    drawChart(data);
    fillTable(data);
  }

  function signedMs(value) {
    if (value === null || value === undefined) return "–";
    const text = C.formatMs(Math.abs(value));
    const zero = Number.parseFloat(text) === 0;
    return (zero ? "±" : value > 0 ? "+" : "−") + text;
  }

  function signedPct(value) {
    if (value === null || value === undefined) return "";
    return ` (${value > 0 ? "+" : value < 0 ? "−" : "±"}${Math.abs(value).toFixed(1)}%)`;
  }

  function drawChart(data) {
    const stages = data.stages;
    const measured = stages.some((s) => s.quantiles.some((q) => q.a_ms !== null || q.b_ms !== null));
    if (!measured) {
      C.message(chart, "No spans of this pipeline in either side: nothing to compare. " +
        "Check the times (UTC) and, for attribute values, their spelling.");
      return;
    }
    const names = stages.map((s) => s.stage.name);
    const panels = data.method.quantiles.length;
    const gap = 0.06;
    const width = (1 - gap * (panels - 1)) / panels;
    const traces = [];
    const annotations = [];
    const axes = {};
    data.method.quantiles.forEach((_, index) => {
      const axis = index === 0 ? "" : String(index + 1);
      const at = (s) => s.quantiles[index];
      const key = at(stages[0]).key;
      const left = index * (width + gap);
      axes[`xaxis${axis}`] = {
        // ticks carry their unit: ms, or seconds for long requests
        ...C.latencyAxis(stages.flatMap((s) => [at(s).a_ms, at(s).b_ms]), false, C.axisTitle(key)),
        domain: [left, left + width],
        gridcolor: C.GRID, linecolor: C.GRID, zeroline: false, automargin: true,
      };
      annotations.push({
        text: `<b>${key}</b>`, xref: "paper", yref: "paper", x: left + width / 2, y: 1.0,
        yanchor: "bottom", showarrow: false, font: { size: 13 },
      });
      const hover = (s, side) => {
        const q = at(s);
        const lines = [`<b>${s.stage.name}</b> ${q.key}`, `A ${C.formatMs(q.a_ms)} · B ${C.formatMs(q.b_ms)}`];
        if (q.delta_ms !== null) lines.push(`change ${signedMs(q.delta_ms)}${signedPct(q.delta_pct)}`);
        lines.push(q.enough_data
          ? `${Math.round(data.method.confidence * 100)}% CI ${signedMs(q.ci_low_ms)} … ${signedMs(q.ci_high_ms)}`
          : `not enough data (needs ${C.formatCount(q.min_spans)} spans per side)`);
        lines.push(CHANGE_WORDS[q.change]);
        return lines.join("<br>") + `<extra>${side}</extra>`;
      };
      traces.push({
        type: "bar", orientation: "h", name: `A: ${sideLabel(data, "a")}`, legendgroup: "a",
        showlegend: index === 0, xaxis: `x${axis}`, yaxis: "y",
        y: names, x: stages.map((s) => at(s).a_ms),
        marker: { color: COLORS.a },
        hovertemplate: stages.map((s) => hover(s, "A")),
      });
      traces.push({
        // B's colour says its change: the legend has one entry per colour drawn (below).
        type: "bar", orientation: "h", name: `B: ${sideLabel(data, "b")}`, legendgroup: "b",
        showlegend: false, xaxis: `x${axis}`, yaxis: "y",
        y: names, x: stages.map((s) => at(s).b_ms),
        marker: { color: stages.map((s) => COLORS[at(s).change]) },
        // The interval of the change, drawn from A: B's bar ends inside it, and when it stays
        // clear of A's value the change is significant.
        error_x: {
          type: "data", symmetric: false, color: C.INK, thickness: 1.2, width: 4,
          array: stages.map((s) => { const q = at(s); return q.ci_high_ms === null ? 0 : Math.max(0, q.a_ms + q.ci_high_ms - q.b_ms); }),
          arrayminus: stages.map((s) => { const q = at(s); return q.ci_low_ms === null ? 0 : Math.max(0, q.b_ms - q.a_ms - q.ci_low_ms); }),
        },
        hovertemplate: stages.map((s) => hover(s, "B")),
      });
    });
    // One legend entry per colour B's bars are drawn in, so every colour is explained.
    const drawn = new Set(data.stages.flatMap((s) => s.quantiles.map((q) => q.change)));
    for (const change of Object.keys(LEGEND_WORDS).filter((c) => drawn.has(c))) {
      traces.push({
        type: "bar", orientation: "h", name: `B, ${LEGEND_WORDS[change]}`, legendgroup: "b",
        x: [null], y: [null], marker: { color: COLORS[change] }, hoverinfo: "skip",
      });
    }
    const layout = C.layout({
      barmode: "group", bargap: 0.25, bargroupgap: 0.08,
      height: Math.max(280, 120 + 46 * names.length),
      margin: { l: 140, r: 16, t: 64, b: 48 },
      legend: { orientation: "h", x: 0, xanchor: "left", y: 1, yref: "container", yanchor: "top" },
      yaxis: { autorange: "reversed", automargin: true, gridcolor: C.GRID, linecolor: C.GRID, ticks: "" },
      annotations,
      ...axes,
    });
    C.draw(chart, traces, layout, "latencyboard-compare");
  }

  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (text !== undefined) td.textContent = text;
    return td;
  }

  function line(text, className) {
    const div = document.createElement("div");
    div.className = className;
    div.textContent = text;
    return div;
  }

  function thresholdWords(method) {
    return `${method.min_delta_ms} ms / ${method.min_delta_pct}%`;
  }

  function fillTable(data) {
    const body = document.querySelector("#verdicts tbody");
    body.replaceChildren();
    for (const stage of data.stages) {
      const row = document.createElement("tr");
      row.className = `change-${stage.change}`;
      row.dataset.stage = stage.stage.name;
      const name = cell(stage.stage.name, "stage");
      row.append(name, cell(`${C.formatCount(stage.n_a)} / ${C.formatCount(stage.n_b)}`, "num"));
      for (const q of stage.quantiles) {
        const td = cell(undefined, `num quantile change-${q.change}`);
        td.append(line(`${C.formatMs(q.a_ms)} → ${C.formatMs(q.b_ms)}`, "pair"));
        if (!q.enough_data) {
          td.append(line(`needs ${C.formatCount(q.min_spans)} spans`, "ci"));
        } else {
          td.append(line(`${signedMs(q.delta_ms)}${signedPct(q.delta_pct)}`, "delta"));
          td.append(line(`${signedMs(q.ci_low_ms)} … ${signedMs(q.ci_high_ms)}`, "ci"));
          // Real (the interval excludes 0) but smaller than the practical threshold.
          if (!q.significant && (q.ci_low_ms > 0 || q.ci_high_ms < 0)) {
            td.append(line(`under ${thresholdWords(data.method)}`, "below"));
          }
        }
        row.append(td);
      }
      row.append(cell(stage.verdict, "verdict"));
      body.append(row);
    }
  }

  // --- wiring -----------------------------------------------------------------------------

  modeButtons.forEach((button) => button.addEventListener("click", () => setMode(button.dataset.mode)));
  form.querySelectorAll("[data-preset]").forEach((button) => button.addEventListener("click", () => {
    setWindows(new Date(config.now), ...PRESETS[button.dataset.preset]);
  }));
  form.addEventListener("submit", (event) => { event.preventDefault(); run(); });

  fillDefaults();
  if (fillFromUrl()) run();
})();
