/* Pipeline page panel: latency per value of one cohort attribute (model.version by default),
 * over the whole chosen window, from the cohort rollups' sketches. An attribute that is not a
 * cohort has no values: the panel says so, and shows admins where to add it. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el, state } = page;
  const chart = el("chart-attributes");
  let body = null;
  let attribute = null;
  let url = null;

  function describe() {
    const note = el("attribute-note");
    if (!body.cohort) {
      note.replaceChildren(`${body.key} is not a cohort attribute of this pipeline, so its values have no sketches.`);
      if (body.add_url) {
        const link = document.createElement("a");
        link.href = body.add_url;
        link.textContent = "Add it as a cohort attribute";
        note.append(" ", link, " (applies to spans folded from then on).");
      }
      return;
    }
    note.textContent = `Every span of ${C.formatTime(body.start)} to ${C.formatTime(body.end)}` +
      ` (${C.formatCount(body.spans)}), from the cohort sketches; percentiles within 1%.` +
      ` The ${body.max_values} most frequent values are shown.`;
  }

  function draw() {
    if (!body) return;
    if (!body.cohort) {
      C.message(chart, `${body.key} is not a cohort attribute: no latency per value.`);
      return;
    }
    if (!body.groups.length) {
      C.message(chart, `No spans carrying ${body.key} from ${C.formatTime(body.start)} to ${C.formatTime(body.end)}.`);
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
      const answer = await C.getJson(url, query);
      if (!page.current(mine)) return;
      body = answer;
      attribute = body.key || null;
      const picker = el("attribute-picker");
      const option = (key) => new Option(key, key, false, key === body.key);
      const others = document.createElement("optgroup");
      others.label = "not cohorts (no values)";
      others.append(...body.other_keys.map(option));
      picker.replaceChildren(...body.keys.map(option), ...(body.other_keys.length ? [others] : []));
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

  page.draw("attributes", (chart) => {
    url = chart.url;
    return { refresh, redraw: draw };
  });
})();
