/* One trace's waterfall (HTML rows on a time axis) and flame view (Plotly icicle), drawn
   from the #trace-data JSON, which has the shape of GET /api/traces/<trace_id>/. Loaded after
   Plotly and charts.js (window.LB.charts). */
(function () {
  "use strict";

  const C = window.LB.charts;
  // The same two colours as the waterfall's bars (traces.css): blue spans, the critical path
  // in vermillion, a colour-blind-safe pair.
  const COLORS = { span: "#0072B2", critical: "#D55E00", trace: "#adb5bd" };
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const spans = data.spans;
  // A trace of zero-length spans still needs an axis to draw on.
  const total = data.duration_ms > 0 ? data.duration_ms : 1;

  // Each figure in the unit that reads best (450 µs, 68.0 ms, 37.75 s); the time axis in
  // seconds from 10 s on.
  const formatMs = C.formatMs;
  const axisUnit = total >= 10000 ? { name: "s", ms: 1000 } : { name: "ms", ms: 1 };

  function element(tag, attributes, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    for (const child of children || []) node.append(child);
    return node;
  }

  const MEASURE_LABELS = { time_to_first_token: "TTFT", time_per_output_token: "TPOT" };

  function percent(ms) {
    return (100 * ms) / total + "%";
  }

  function header(step) {
    const axis = element("div", { class: "wf-axis" });
    const tickDigits = Math.max(0, -Math.floor(Math.log10(step / axisUnit.ms)));
    for (let t = 0; t <= total + 1e-9; t += step) {
      const label = element("span", { class: "wf-tick", text: (t / axisUnit.ms).toFixed(tickDigits) });
      label.style.left = percent(t);
      // Ticks at the right end are drawn to the left of their line, inside the axis.
      if (t > 0.95 * total) label.classList.add("wf-tick-end");
      axis.append(label);
    }
    return element("div", { class: "wf-row wf-header", role: "row" }, [
      element("div", { class: "wf-name", text: `Span (time axis in ${axisUnit.name})` }),
      axis,
      element("div", { class: "wf-num", text: "Total" }),
      element("div", { class: "wf-num", text: "Self" }),
      element("div", { class: "wf-num", text: "On path", title: "Time of the critical path in the span itself" }),
    ]);
  }

  function row(span, index, hasChildren) {
    const name = element("div", { class: "wf-name" });
    name.style.setProperty("--depth", span.depth);
    if (hasChildren) {
      name.append(
        element("button", {
          class: "wf-toggle",
          type: "button",
          "aria-label": "Collapse children",
          "aria-expanded": "true",
          text: "▾",
        }),
      );
    } else {
      name.append(element("span", { class: "wf-toggle" }));
    }
    name.append(element("span", { class: "wf-label", text: span.name }));
    if (span.stage !== span.name) {
      name.append(element("span", { class: "wf-stage", text: span.stage }));
    }
    if (span.derived) {
      name.append(element("span", { class: "badge derived", text: "derived", title: "Read by ingest from its parent's " + span.derived.read_from }));
    }
    for (const measure of span.measures) {
      name.append(
        element("span", {
          class: "badge measure",
          text: `${MEASURE_LABELS[measure.name] || measure.name} ${formatMs(measure.ms)}`,
          title: measure.definition,
        }),
      );
    }
    if (span.critical) {
      name.append(element("span", { class: "badge critical", text: "critical path" }));
    }
    if (span.orphan) {
      name.append(element("span", { class: "badge orphan", text: "parent not received" }));
    }
    if (span.status === "error") {
      name.append(element("span", { class: "badge error", text: "error" }));
    }
    const exceptions = span.events.filter(isException);
    for (const event of exceptions) {
      // The class name alone: the full type is in the note under the row.
      const type = exceptionType(event);
      name.append(element("span", { class: "badge exception", text: type.split(".").pop(), title: type }));
    }
    const bar = element("div", { class: "wf-bar" });
    bar.style.left = percent(span.offset_ms);
    bar.style.width = percent(span.duration_ms);
    const marks = span.events.map((event) => {
      const mark = element("span", {
        class: isException(event) ? "wf-event exception" : "wf-event",
        title: `${event.name} at ${formatMs(event.offset_ms - span.offset_ms)} into the span` +
          (isException(event) ? `: ${exceptionType(event)}: ${event.attributes["exception.message"] || ""}` : ""),
        "data-event": event.name,
      });
      mark.style.left = percent(event.offset_ms);
      return mark;
    });
    // The first token, where a time-to-first-token figure places it on its span.
    for (const measure of span.measures.filter((m) => m.name === "time_to_first_token")) {
      const tick = element("span", {
        class: "wf-first-token",
        title: `First token after ${formatMs(measure.ms)}: ${measure.definition}`,
      });
      tick.style.left = percent(span.offset_ms + measure.ms);
      marks.push(tick);
    }
    const classes = ["wf-row", "wf-span"];
    if (span.derived) classes.push("derived");
    if (span.critical) classes.push("critical");
    if (span.status === "error") classes.push("error");
    if (span.orphan) classes.push("orphan");
    const title = span.critical
      ? `On the critical path: ${formatMs(span.critical_ms)} of it in this span itself`
      : "";
    return element(
      "div",
      {
        class: classes.join(" "),
        role: "button",
        tabindex: "0",
        "aria-expanded": "false",
        title: title,
        "data-index": index,
        "data-span-id": span.span_id,
        "data-name": span.name,
        "data-duration-ms": span.duration_ms,
        "data-self-ms": span.self_ms,
        "data-critical": span.critical,
        "data-critical-ms": span.critical_ms,
      },
      [
        name,
        element("div", { class: "wf-track" }, [bar, ...marks]),
        element("div", { class: "wf-num wf-total", text: formatMs(span.duration_ms) }),
        element("div", { class: "wf-num wf-self", text: formatMs(span.self_ms) }),
        element("div", {
          class: "wf-num wf-critical",
          text: span.critical ? formatMs(span.critical_ms) : "–",
        }),
      ],
    );
  }

  function isException(event) {
    return event.name === "exception";
  }

  function exceptionType(event) {
    return String(event.attributes["exception.type"] || "exception");
  }

  function attributeText(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  // A recorded exception as a reader wants it: type and message, the stack trace folded.
  function exceptionNote(span, event) {
    const message = event.attributes["exception.message"];
    const note = element("div", { class: "wf-exception", role: "note" }, [
      element("strong", { text: exceptionType(event) }),
      element("span", { text: message === undefined ? "" : ": " + attributeText(message) }),
      element("span", { class: "muted", text: ` · at ${formatMs(event.offset_ms - span.offset_ms)} into ${span.name}` }),
    ]);
    note.style.setProperty("--depth", span.depth);
    const stack = event.attributes["exception.stacktrace"];
    if (stack !== undefined) {
      note.append(
        element("details", { class: "wf-stack" }, [
          element("summary", { text: "Stack trace" }),
          element("pre", { class: "mono", text: attributeText(stack) }),
        ]),
      );
    }
    return note;
  }

  function eventList(span) {
    const table = element("table", { class: "grid wf-events" }, [
      element("caption", {
        text: span.events.length
          ? `Events (${span.events.length})` +
            (span.dropped_events_count ? `; ${span.dropped_events_count} more dropped` : "")
          : `No events${span.dropped_events_count ? `; ${span.dropped_events_count} dropped` : ""}`,
      }),
    ]);
    for (const event of span.events) {
      const pairs = Object.keys(event.attributes)
        .sort()
        .filter((key) => key !== "exception.stacktrace")
        .map((key) => `${key}=${attributeText(event.attributes[key])}`);
      if (event.dropped_attributes_count) pairs.push(`(${event.dropped_attributes_count} attributes dropped)`);
      table.append(
        element("tr", {}, [
          element("th", { class: "mono", text: event.name }),
          element("td", { class: "num", text: "+" + formatMs(event.offset_ms - span.offset_ms) }),
          element("td", { class: "mono", text: pairs.join(" ") }),
        ]),
      );
    }
    return table;
  }

  function detail(span) {
    const parent =
      span.parent_span_id === null
        ? "none (a root)"
        : span.parent_span_id + (span.orphan ? " (parent not received)" : "");
    const fields = [
      ["Span id", span.span_id],
      ["Parent span id", parent],
      ["Pipeline", span.pipeline.name],
      ["Stage", span.stage + (span.derived ? ` (derived from the parent's ${span.derived.read_from})` : "")],
      ...span.measures.map((m) => [m.name, `${formatMs(m.ms)}: ${m.definition}`]),
      ["Kind", span.kind],
      ["Status", span.status + (span.status_message ? ": " + span.status_message : "")],
      ["Start (UTC)", span.start_time.replace("T", " ").replace("Z", "")],
      ["Starts at", formatMs(span.offset_ms)],
      ["Duration", formatMs(span.duration_ms)],
      ["Self time", formatMs(span.self_ms)],
      ["Critical path", span.critical ? `yes, ${formatMs(span.critical_ms)} in this span itself` : "no"],
    ];
    const list = element("dl", { class: "wf-fields" });
    for (const [term, value] of fields) {
      list.append(element("div", {}, [element("dt", { text: term }), element("dd", { text: value })]));
    }
    const keys = Object.keys(span.attributes).sort();
    const table = element("table", { class: "grid wf-attributes" }, [
      element("caption", { text: keys.length ? "Attributes" : "No attributes" }),
    ]);
    for (const key of keys) {
      table.append(
        element("tr", {}, [
          element("th", { class: "mono", text: key }),
          element("td", { class: "mono", text: attributeText(span.attributes[key]) }),
        ]),
      );
    }
    return element("div", { class: "wf-detail", role: "region", "aria-label": "Span " + span.name }, [
      list,
      element("div", {}, [table, eventList(span)]),
    ]);
  }

  function drawWaterfall(container) {
    const step = C.niceStep(total, 6);
    container.style.setProperty("--tick", (100 * step) / total + "%");
    container.append(header(step));
    const hasChildren = spans.map(() => false);
    for (const span of spans) {
      if (span.parent_index !== null) hasChildren[span.parent_index] = true;
    }
    const rows = spans.map((span, index) => row(span, index, hasChildren[index]));
    const details = spans.map(() => null);
    const collapsed = spans.map(() => false);
    // Exceptions are shown under their span without a click.
    const notes = spans.map((span) => span.events.filter(isException).map((event) => exceptionNote(span, event)));
    rows.forEach((node, index) => container.append(node, ...notes[index]));

    function toggleDetail(index) {
      const open = details[index] !== null;
      if (open) {
        details[index].remove();
        details[index] = null;
      } else {
        details[index] = detail(spans[index]);
        (notes[index].at(-1) || rows[index]).after(details[index]);
      }
      rows[index].setAttribute("aria-expanded", String(!open));
      rows[index].classList.toggle("selected", !open);
    }

    function applyCollapse() {
      const hidden = spans.map(() => false);
      spans.forEach((span, index) => {
        const parent = span.parent_index;
        hidden[index] = parent !== null && (hidden[parent] || collapsed[parent]);
        rows[index].hidden = hidden[index];
        for (const note of notes[index]) note.hidden = hidden[index];
        if (details[index] !== null) details[index].hidden = hidden[index];
      });
    }

    container.addEventListener("click", (event) => {
      const target = event.target.closest(".wf-span");
      if (target === null) return;
      const index = Number(target.dataset.index);
      const toggle = event.target.closest("button.wf-toggle");
      if (toggle !== null) {
        collapsed[index] = !collapsed[index];
        toggle.textContent = collapsed[index] ? "▸" : "▾";
        toggle.setAttribute("aria-expanded", String(!collapsed[index]));
        toggle.setAttribute("aria-label", collapsed[index] ? "Expand children" : "Collapse children");
        applyCollapse();
      } else {
        toggleDetail(index);
      }
    });
    container.addEventListener("keydown", (event) => {
      const target = event.target.closest(".wf-span");
      if (target !== null && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        toggleDetail(Number(target.dataset.index));
      }
    });
  }

  /** Each span's work: its self time plus its children's work. That is what the flame's
   * widths are (Plotly's "remainder" branch values), and what its labels say: spans that
   * run in parallel are laid side by side, so a parent of parallel children is wider than
   * its wall-clock duration, and the label says both. */
  function workMs() {
    const work = spans.map((span) => span.self_ms);
    // Children come after their parents in the list: summing from the end adds each
    // subtree's work to its parent before the parent is added to its own.
    for (let index = spans.length - 1; index >= 0; index -= 1) {
      const parent = spans[index].parent_index;
      if (parent !== null) work[parent] += work[index];
    }
    return work;
  }

  function drawFlame(container) {
    const ids = spans.map((_, index) => String(index));
    const work = workMs();
    const label = (index) => {
      const wall = spans[index].duration_ms;
      // Beyond rounding, work and wall time differ only where work ran in parallel.
      return Math.abs(work[index] - wall) <= 0.001 * Math.max(wall, 1)
        ? formatMs(wall)
        : `${formatMs(work[index])} of work · ${formatMs(wall)} wall`;
    };
    const topLevel = spans.filter((span) => span.parent_index === null).length;
    // Plotly draws one tree: several top-level spans (orphans) hang under the trace itself.
    const root = topLevel > 1 ? "trace" : "";
    const trace = {
      type: "icicle",
      ids: ids,
      labels: spans.map((span) => span.name),
      parents: spans.map((span) => (span.parent_index === null ? root : String(span.parent_index))),
      values: spans.map((span) => span.self_ms),
      branchvalues: "remainder",
      sort: false,
      tiling: { orientation: "v" },
      customdata: spans.map((span, index) => [
        formatMs(span.duration_ms),
        formatMs(span.self_ms),
        span.stage + (span.status === "error" ? " · error" : ""),
        label(index),
        work[index],
      ]),
      marker: { colors: spans.map((span) => (span.critical ? COLORS.critical : COLORS.span)) },
      texttemplate: "%{label}<br>%{customdata[3]}",
      hovertemplate:
        "<b>%{label}</b><br>stage %{customdata[2]}<br>wall-clock %{customdata[0]}" +
        "<br>self %{customdata[1]}<br>width: %{customdata[3]}<extra></extra>",
    };
    if (root) {
      trace.ids.push(root);
      trace.labels.push("trace (top-level spans)");
      trace.parents.push("");
      trace.values.push(0);
      const total = work.reduce((sum, value, index) => (spans[index].parent_index === null ? sum + value : sum), 0);
      trace.customdata.push([formatMs(data.duration_ms), formatMs(0), "—", `${formatMs(total)} of work`, total]);
      trace.marker.colors.push(COLORS.trace);
    }
    const depth = Math.max(...spans.map((span) => span.depth)) + (root ? 2 : 1);
    C.draw(
      container,
      [trace],
      C.layout({
        margin: { t: 4, l: 4, r: 4, b: 4 },
        height: Math.min(640, Math.max(180, 46 * depth)),
        uniformtext: { minsize: 12, mode: "hide" },
      }),
      "trace-" + data.trace_id,
    );
  }

  drawWaterfall(document.getElementById("waterfall"));
  drawFlame(document.getElementById("flame"));
})();
