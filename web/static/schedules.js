// Schedules: every schedule with its next fire times (in UTC and in the
// schedule's time zone), whether it is paused, its last fire and a link to
// the instances it started (their ids start with "NAME-"). Live-refreshed.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace, when, errorBanner } from './ui.js';

/** How many of the next fire times a row shows (the API gives 5). */
export const FIRES_SHOWN = 3;

export function mount(root) {
  const tbody = h('tbody');
  replace(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Schedules')),
    h('div', { class: 'card table-card' },
      h('table', { class: 'table', id: 'schedule-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Name'), h('th', {}, 'Definition'), h('th', {}, 'Cron'), h('th', {}, 'Overlap'),
          h('th', {}, 'State'), h('th', {}, 'Next fire times'), h('th', {}, 'Last fire'), h('th', {}, 'Instances'))),
        tbody)));
  let failed = false;
  const load = async () => {
    let list;
    try {
      list = (await api.listSchedules()).data.schedules || [];
      failed = false;
    } catch (err) {
      if (!failed) errorBanner('Loading schedules failed', err);
      failed = true;
      return;
    }
    if (list.length === 0) {
      replace(tbody, h('tr', { class: 'empty-row' }, h('td', { colspan: 8 },
        'No schedules yet. Add one with “flowd schedule apply FILE” or PUT /v1/schedules/NAME.')));
      return;
    }
    replace(tbody, list.map(scheduleRow));
  };
  load();
  return every(load);
}

/** localTime shows an RFC 3339 time in zone, or '' when the browser lacks it. */
export function localTime(iso, zone) {
  try {
    return new Intl.DateTimeFormat('en-GB', {
      timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
    }).format(new Date(iso));
  } catch {
    return '';
  }
}

function scheduleRow(s) {
  const instances = '#/workflows?search=' + encodeURIComponent(s.name + '-');
  const fires = (s.next_fire_times || []).slice(0, FIRES_SHOWN);
  return h('tr', { 'data-name': s.name },
    h('td', {}, h('span', { class: 'mono' }, s.name)),
    h('td', {}, h('a', { href: '#/definitions/' + encodeURIComponent(s.definition), class: 'mono' }, s.definition)),
    h('td', {}, h('code', {}, s.cron), ' ', h('span', { class: 'muted' }, s.timezone)),
    h('td', {}, h('span', { class: 'mono' }, s.overlap)),
    h('td', { class: 'schedule-state' }, s.paused ? h('span', { class: 'badge', 'data-status': 'PAUSED' }, 'PAUSED') : h('span', { class: 'muted' }, 'active')),
    h('td', { class: 'next-fires' }, fires.length === 0 ? h('span', { class: 'muted' }, 'none')
      : h('ul', { class: 'plain' }, fires.map((t) => h('li', { class: 'mono', title: localTime(t, s.timezone) }, t,
        s.timezone !== 'UTC' ? h('span', { class: 'muted' }, ' (' + localTime(t, s.timezone) + ')') : null)))),
    h('td', {}, s.last_fire_at
      ? [when(s.last_fire_at), ' ', s.last_instance_id ? h('a', { href: '#/workflows/' + encodeURIComponent(s.last_instance_id), class: 'mono last-instance' }, s.last_instance_id) : null]
      : h('span', { class: 'muted' }, 'never')),
    h('td', {}, h('a', { href: instances, class: 'instances-link' }, 'instances')));
}
