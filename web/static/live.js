// The shared live-refresh switch. Views register a poll function with every();
// it runs every 2 seconds while live refresh is on, the tab is visible and no
// token prompt is open.

const LIVE_KEY = 'flowd.live';
export const POLL_MS = 2000;

export const live = {
  on: sessionStorage.getItem(LIVE_KEY) !== 'off',
  authPending: false,
};

export function setLive(on) {
  live.on = on;
  sessionStorage.setItem(LIVE_KEY, on ? 'on' : 'off');
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
