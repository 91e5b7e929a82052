/* Pipeline page panel: latency per value of one span attribute (model.version by default),
 * exact percentiles from the raw spans of the window's last day at most. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el, state } = page;
  const chart = el("chart-attributes");
  let body = null;
  let attribute = null;

  function describe() {
    const hours = cfg.attributeMaxHours;
    let text = `Exact percentiles from raw spans, of the last ${hours} h at most` +
      ` (here ${C.formatTime(body.start)} to now): ${C.formatCount(body.spans_read)} spans read`;
    if (body.capped) {
      text += `, only the newest ${C.formatCount(body.max_spans)}, from ${C.formatTime(body.covered_from)}`;
    }
    text += `. The ${body.max_values} most frequent values are shown.`;
    el("attribute-note").textContent = text;
  }

  function draw() {
    if (!body) return;
    if (!body.groups.length) {
      const since = C.formatTime(body.start);
      C.message(chart, body.key
        ? `No spans carrying ${body.key} since ${since}.`
        : `No spans with attributes since ${since}: nothing to break the latency down by.`);
      return;
    }
    const key = state.percentile;
    const index = body.quantiles.findIndex(
      (q) => Math.abs(q - cfg.percentiles.find((p) => p.key === key).q) < 1e-9);
    const stageNames = [...new Set(body.groups.map((g) => g.stage.name))];
    const values = body.groups.map((g) => g.quantiles_ms[index]);
    const traces = body.values.map((value, i) => {
      const groups = body.groups.filter((g) => g.value === value);
      return {
        type: "bar",
        name: `${body.key} = ${value}`,
        x: groups.map((g) => g.stage.name),
        y: groups.map((g) => g.quantiles_ms[index]),
        customdata: groups.map((g) => [g.n, g.error_rate * 100, C.formatMs(g.quantiles_ms[index])]),
        marker: { color: C.PALETTE[(i + 4) % C.PALETTE.length] },
        text: groups.map((g) => C.formatMs(g.quantiles_ms[index])),
        textposition: "outside",
        cliponaxis: false,
        hovertemplate: `${body.key} = ${value}<br>%{x}: <b>%{customdata[2]}</b> ${key}` +
          "<br>n = %{customdata[0]:,}, errors %{customdata[1]:.2f}%<extra></extra>",
      };
    });
    C.draw(chart, traces, C.layout({
      barmode: "group",
      showlegend: true,
      margin: { t: 16 },
      xaxis: {
        type: "category", categoryorder: "array", categoryarray: stageNames, title: C.axisTitle("stage"),
      },
      // Linear even when the line charts are logarithmic: a bar's length is its value.
      yaxis: C.latencyAxis(values, false, C.axisTitle(`latency ${key}`)),
    }), `${cfg.pipeline.name}-by-${body.key}`);
  }

  async function refresh(range, mine) {
    const query = {
      start: range.start, end: range.end, q: cfg.percentiles.map((p) => p.q).join(","),
    };
    if (attribute) query.key = attribute;
    try {
      const answer = await C.getJson(cfg.urls.attributes, query);
      if (!page.current(mine)) return;
      body = answer;
      attribute = body.key || null;
      const picker = el("attribute-picker");
      picker.replaceChildren(...body.keys.map((key) => new Option(key, key, false, key === body.key)));
      picker.disabled = !body.keys.length;
      describe();
      draw();
    } catch (error) {
      if (page.current(mine)) page.failed(chart, error);
    }
  }

  el("attribute-picker").addEventListener("change", (event) => {
    attribute = event.target.value;
    refresh(page.range, page.generation);
  });

  page.panels.push({ refresh, redraw: draw });
})();
