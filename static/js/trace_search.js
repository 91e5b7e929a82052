/* The trace search form: the stage list offers the chosen pipeline's stages only (all
 * pipelines' stages, grouped, when none is chosen), and follows the pipeline as it changes. */
(function () {
  "use strict";

  const pipeline = document.getElementById("f-pipeline");
  const stage = document.getElementById("f-stage");
  if (!pipeline || !stage) return;
  // Every pipeline's group, kept here so that a group taken out can be put back in order.
  const groups = [...stage.querySelectorAll("optgroup[data-pipeline]")];

  function narrow() {
    const chosen = pipeline.value;
    const selected = stage.value;
    for (const group of groups) group.remove();
    for (const group of groups) {
      if (!chosen || group.dataset.pipeline === chosen) stage.append(group);
    }
    // A stage of another pipeline is no longer offered: back to any stage.
    stage.value = [...stage.options].some((option) => option.value === selected) ? selected : "";
  }

  pipeline.addEventListener("change", narrow);
  narrow();
})();
