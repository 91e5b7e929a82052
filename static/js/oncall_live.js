// The on-call page, live: an "incident" event (one of the user's teams' incidents opened,
// changed or resolved) has the server render the page again and the incidents swapped in
// place; a reconnect ("resync") does the same for what was missed meanwhile.
(function () {
  "use strict";

  const shown = document.getElementById("incidents");
  if (!shown || !window.LatencyboardLive) return;
  let pending = null;

  async function refresh() {
    pending = null;
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    const incidents = fresh.getElementById("incidents");
    if (!incidents) return;
    shown.replaceChildren(...Array.from(incidents.childNodes, (node) => document.importNode(node, true)));
    shown.dataset.liveUpdated = String(Date.now());
  }

  function soon() {
    // Events of one evaluation come together: one fetch for them all.
    if (pending === null) pending = setTimeout(refresh, 250);
  }

  const live = window.LatencyboardLive.connect("/ws/live/");
  live.addEventListener("incident", soon);
  live.addEventListener("resync", soon);
})();
