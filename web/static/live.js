// The shared live-refresh switch and the server's reachability. Views register
// a poll function with every(); it runs every 2 seconds while live refresh is
// on, the tab is visible and no token prompt is open.
//
// Every API answer is reported to serverAnswered (app.js wires api.js to it):
// a failed fetch or a 5xx makes the server "offline" until something answers
// again. While offline, a probe of healthz runs every 2 seconds even if live
// refresh is paused, so the indicator never says "retrying" without retrying.

const LIVE_KEY = 'flowd.live';
export const POLL_MS = 2000;
// A probe that hangs this long counts as no answer.
const PROBE_TIMEOUT_MS = 5000;

export const live = {
  on: sessionStorage.getItem(LIVE_KEY) !== 'off',
  authPending: false,
  offline: false, // the last request got no answer or a 5xx
  offlineReason: '',
};

const listeners = new Set();

/** onLiveChange calls fn whenever live.on or live.offline changes. */
export function onLiveChange(fn) { listeners.add(fn); }

function changed() { listeners.forEach((fn) => fn()); }

export function setLive(on) {
  live.on = on;
  sessionStorage.setItem(LIVE_KEY, on ? 'on' : 'off');
  changed();
}

/**
 * serverAnswered records the outcome of one request: ok is false for a failed
 * fetch or a 5xx answer; reason says which, for the indicator's tooltip.
 */
export function serverAnswered(ok, reason = '') {
  const wasOffline = live.offline;
  const oldReason = live.offlineReason;
  live.offline = !ok;
  if (!ok) live.offlineReason = reason;
  if (live.offline && !wasOffline) startProbe();
  if (!live.offline && wasOffline) stopProbe();
  if (live.offline !== wasOffline || live.offlineReason !== oldReason) changed();
}

let probeTimer = null;

function startProbe() {
  if (probeTimer) return;
  let busy = false;
  probeTimer = setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const res = await fetch('healthz', { cache: 'no-store', signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
      serverAnswered(res.status < 500, `the server answered ${res.status} ${res.statusText}`.trim());
    } catch (e) {
      serverAnswered(false, e.name === 'TimeoutError' ? 'no answer within 5 seconds' : 'cannot reach the server');
    } finally {
      busy = false;
    }
  }, POLL_MS);
}

function stopProbe() {
  clearInterval(probeTimer);
  probeTimer = null;
}

/** every runs fn every 2 seconds while live refresh is on; returns a stop function. */
export function every(fn) {
  let busy = false;
  const id = setInterval(async () => {
    if (!live.on || live.authPending || document.hidden || busy) return;
    busy = true;
    try { await fn(); } catch { /* the view shows its own errors */ } finally { busy = false; }
  }, POLL_MS);
  return () => clearInterval(id);
}
