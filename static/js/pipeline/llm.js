/* Pipeline page panel: the LLM figures of the chosen window (time to first token, time per
 * output token, and output tokens per second), each with its n, its error bound and its
 * source's definition, from the percentiles API's window summary of the measure series.
 *
 * Output tokens per second is 1 / time per output token of each request: its quantiles are
 * TPOT's turned over (the speed the slowest 10% of requests fall below is 1 / TPOT's p90), so it
 * has TPOT's n and relative bound. */
(function () {
  "use strict";

  const page = window.LB.pipeline;
  const { C, cfg, el } = page;
  const table = el("llm-figures");
  let url = null;
  const QUANTILES = [
    { q: 0.5, key: "p50" },
    { q: 0.9, key: "p90" },
    { q: 0.99, key: "p99" },
  ];
  const LABELS = {
    time_to_first_token: "Time to first token (TTFT)",
    time_per_output_token: "Time per output token (TPOT)",
  };

  function cell(text, attributes) {
    const td = document.createElement("td");
    td.textContent = text;
    for (const [name, value] of Object.entries(attributes || {})) td.setAttribute(name, value);
    return td;
  }

  function row(label, values, figures, definition, dataName) {
    const tr = document.createElement("tr");
    tr.dataset.figure = dataName;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = label;
    tr.append(th, ...values.map((text) => cell(text, { class: "num" })));
    tr.append(
      cell(figures.n ? C.formatCount(figures.n) : "0", { class: "num" }),
      cell(figures.bound, { class: "num" }),
      cell(definition, { class: "definition" }),
    );
    return tr;
  }

  function draw(body) {
    const bound = `±${(100 * body.relative_error).toFixed(0)}%`;
    const rows = [];
    for (const series of body.series) {
      const measure = cfg.llm.find((m) => m.id === series.stage.id);
      const summary = series.summary;
      const ms = QUANTILES.map(({ key }) => summary[key]);
      const figures = { n: summary.n, bound: summary.n ? bound : "–" };
      rows.push(
        row(LABELS[measure.name] || measure.name, ms.map((v) => (v === null ? "–" : C.formatMs(v))), figures,
          measure.definition, measure.name),
      );
      if (measure.name === "time_per_output_token") {
        const speed = ms.map((v) => (v ? `${(1000 / v).toFixed(1)} tok/s` : "–"));
        rows.push(
          row("Output tokens per second", speed, figures,
            "1 / time per output token of each request: the p90 column is the speed the slowest 10% of requests fall below.",
            "output_tokens_per_second"),
        );
      }
    }
    table.tBodies[0].replaceChildren(...rows);
    el("llm-window").textContent = `${C.formatTime(body.start)} to ${C.formatTime(body.end)}`;
  }

  async function refresh(range, mine) {
    try {
      const body = await C.getJson(url, {
        stages: cfg.llm.map((m) => m.id).join(","),
        start: range.start,
        end: range.end,
        step: `${range.step / 60}m`,
        q: QUANTILES.map(({ q }) => q).join(","),
      });
      if (page.current(mine)) draw(body);
    } catch (error) {
      if (page.current(mine)) el("llm-window").textContent = `Could not load the LLM figures: ${error.message}`;
    }
  }

  // Only an LLM pipeline's page has the table.
  page.draw("llm", (chart) => {
    if (!table) return null;
    url = chart.url;
    return { refresh, redraw() {} };
  });
})();
