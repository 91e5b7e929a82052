// The rule form: the stage boxes of the chosen pipeline only, and "would it have fired in
// the last 7 days?" asked of the preview API with the form as it stands (nothing is saved).
(function () {
  "use strict";

  const form = document.getElementById("rule-form");
  if (!form) return;
  const pipeline = form.elements.namedItem("pipeline");
  const boxes = Array.from(form.querySelectorAll("input[name=stages]"));

  function offerStages() {
    for (const box of boxes) {
      const mine = box.dataset.pipeline === pipeline.value;
      const row = box.closest("div") || box.parentElement;
      row.hidden = !mine;
      if (!mine) box.checked = false;
    }
  }
  pipeline.addEventListener("change", offerStages);
  offerStages();

  /** The form as the API takes it: every box a boolean, stages and channels as id lists. */
  function fields() {
    const found = { stages: [], channels: [] };
    for (const element of form.elements) {
      if (!element.name || element.name === "csrfmiddlewaretoken" || element.type === "submit") continue;
      if (element.name === "stages" || element.name === "channels") {
        if (element.checked) found[element.name].push(Number(element.value));
      } else if (element.type === "checkbox") {
        found[element.name] = element.checked;
      } else {
        found[element.name] = element.value;
      }
    }
    found.name = found.name || "preview";
    return found;
  }

  const section = document.getElementById("preview");
  const summary = document.getElementById("preview-summary");
  const table = document.getElementById("preview-alerts");
  const time = (iso) => (iso ? iso.slice(0, 16).replace("T", " ") : "still open");

  function cell(row, text) {
    row.insertCell().textContent = text;
  }

  async function preview() {
    section.hidden = false;
    section.dataset.state = "loading";
    summary.textContent = "Replaying the detector…";
    table.hidden = true;
    const response = await fetch(document.getElementById("preview-button").dataset.url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "X-CSRFToken": form.elements.namedItem("csrfmiddlewaretoken").value,
      },
      body: JSON.stringify(fields()),
    });
    const answer = await response.json();
    if (!response.ok) {
      summary.textContent = "Not previewed: " + JSON.stringify(answer);
      section.dataset.state = "error";
      return;
    }
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const alert of answer.alerts) {
      const row = body.insertRow();
      cell(row, alert.stage);
      cell(row, time(alert.fired_at));
      cell(row, time(alert.resolved_at));
      cell(
        row,
        `${alert.quantile} ${alert.baseline_ms.toFixed(1)} → ${alert.current_ms.toFixed(1)} ms ` +
          `(+${alert.effect_pct.toFixed(0)}%), p = ${alert.p_value.toPrecision(2)}`
      );
    }
    table.hidden = answer.alerts.length === 0;
    summary.textContent = answer.alerts.length
      ? `It would have raised ${answer.alerts.length} alert(s), paging ${answer.pages} time(s), ` +
        `evaluated every minute from ${time(answer.first)} to ${time(answer.last)} UTC.`
      : `It would not have fired: evaluated every minute from ${time(answer.first)} to ${time(answer.last)} UTC.`;
    section.dataset.state = "ready";
  }

  document.getElementById("preview-button").addEventListener("click", preview);
})();
