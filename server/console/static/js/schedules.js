// Schedules page: the server's schedules (GET /schedules, admin scope),
// from workflow files and from the API, with each one's last and next
// tick and the latest tick whose run could not be started.

import { api } from './api.js';
import { card, errorBox, fill, h, timeAgo } from './dom.js';

const pageSize = 500;

export async function mount(main) {
  let page;
  try {
    page = await api(`/schedules?limit=${pageSize}`);
  } catch (e) {
    fill(main, h('h1', null, 'Schedules'), errorBox(e));
    return;
  }
  const ss = page.schedules || [];
  const failed = ss.filter((s) => s.last_failure);
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Schedules'),
    h('span', { class: 'muted' }, page.next_cursor ? `the first ${ss.length} schedules` : `${ss.length} schedules`));
  if (!ss.length) {
    fill(main, head, h('p', { class: 'muted' }, 'No schedules. Add one with ', h('code', null, 'asmp schedules add WORKFLOW CRON'),
      ', POST /schedules, or a schedules: list in a workflow file.'));
    return;
  }
  const columns = ['Schedule', 'Workflow', 'Cron', 'Source', 'Last tick', 'Next tick', 'Last failure'];
  const table = h('table', { class: 'schedules-table' },
    h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, ss.map(row)));
  const failures = failed.length ? card('Failed ticks', failed.map((s) => h('p', { class: 'notice error', dataset: { schedule: s.schedule_id } },
    h('strong', { class: 'mono' }, s.schedule_id), ` · tick ${s.last_failure.tick} started no run: `,
    h('span', { class: 'hint' }, s.last_failure.error)))) : null;
  fill(main, head, table, failures);
}

function row(s) {
  const none = (text) => h('span', { class: 'muted' }, text);
  return h('tr', { dataset: { schedule: s.schedule_id } },
    h('td', { class: 'mono' }, s.schedule_id),
    h('td', null, h('a', { href: `#/runs?workflow_id=${encodeURIComponent(s.workflow_id)}` }, s.workflow_id)),
    h('td', null, h('code', null, s.cron), h('span', { class: 'muted' }, ` ${s.timezone}`)),
    h('td', null, s.source),
    h('td', null, s.last_tick ? timeAgo(s.last_tick) : none('none yet')),
    h('td', null, s.next_tick
      ? h('time', { datetime: s.next_tick, title: s.next_tick }, `${s.next_tick.replace('T', ' ').slice(0, 16)} UTC`)
      : none('none within five years')),
    h('td', { class: 'failure' }, s.last_failure
      ? h('span', { class: 'badge status-failed', title: s.last_failure.error }, 'failed ', timeAgo(s.last_failure.tick))
      : ''));
}
