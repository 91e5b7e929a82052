// Live updates over a WebSocket: one connection per page, reconnecting with backoff, and an
// EventTarget the page's panels subscribe to.
//
//   const live = LatencyboardLive.connect("/ws/live/pipelines/7/");
//   live.addEventListener("points", (e) => extendChart(e.detail));   // one event per type
//   live.addEventListener("resync", () => refetchEverything());      // after a reconnect
//
// Event types from the server: "points" (a pipeline's touched minutes, in the percentiles
// API's series shape), "stage_shares" (fetch that panel again), "rollup" (overview: pipelines
// with new figures). "status" carries "live", "reconnecting" or
// "offline"; an element with data-live-status shows it.
(function () {
  "use strict";

  const SIGNED_OUT = 4401;
  const NOT_FOUND = 4404;
  // Capped low so that a page is live again within seconds of the server (or Redis) returning.
  const BACKOFF_MS = [500, 1000, 2000, 4000];
  const OFFLINE_AFTER_FAILURES = 3;
  const LABELS = { live: "Live", reconnecting: "Reconnecting…", offline: "Offline" };

  class LiveConnection extends EventTarget {
    constructor(path) {
      super();
      this.url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
      this.failures = 0;
      this.everConnected = false;
      this.stopped = false;
      this.status = null;
      this.open();
    }

    open() {
      const socket = new WebSocket(this.url);
      let hello = false;
      socket.addEventListener("message", (message) => {
        const event = JSON.parse(message.data);
        if (event.type === "hello") {
          hello = true;
          this.failures = 0;
          this.setStatus("live");
          // Events published while this page was not listening are lost: fetch them.
          if (this.everConnected) this.emit("resync", {});
          this.everConnected = true;
          return;
        }
        this.emit(event.type, event);
      });
      socket.addEventListener("close", (closing) => {
        if (closing.code === SIGNED_OUT || closing.code === NOT_FOUND || this.stopped) {
          this.setStatus("offline");
          return;
        }
        if (!hello) this.failures += 1;
        this.setStatus(this.failures >= OFFLINE_AFTER_FAILURES ? "offline" : "reconnecting");
        const base = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)];
        setTimeout(() => this.open(), base / 2 + Math.random() * (base / 2));
      });
      this.socket = socket;
    }

    close() {
      this.stopped = true;
      this.socket.close();
    }

    emit(type, detail) {
      this.dispatchEvent(new CustomEvent(type, { detail }));
    }

    setStatus(status) {
      if (status === this.status) return;
      this.status = status;
      this.emit("status", status);
      document.querySelectorAll("[data-live-status]").forEach((element) => {
        element.hidden = false;
        element.dataset.liveStatus = status;
        element.textContent = LABELS[status];
      });
    }
  }

  window.LatencyboardLive = {
    connect(path) {
      return new LiveConnection(path);
    },
  };
})();
