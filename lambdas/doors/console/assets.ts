/**
 * The console's only script and style, served by the gateway itself (no CDN: it works offline and
 * behind a firewall). The pages work without the script; it adds what is live: countdowns to an
 * ask's expiry, and a run's event log, drawn a screenful at a time (20,000 events open at once) and
 * followed while the run goes on.
 */
const SCRIPT = String.raw`(() => {
  'use strict';
  const pad = (n) => String(n).padStart(2, '0');
  function countdowns() {
    for (const el of document.querySelectorAll('[data-countdown]')) {
      const left = Date.parse(el.dataset.countdown) - Date.now();
      if (Number.isNaN(left)) continue;
      if (left <= 0) { el.textContent = 'expired'; continue; }
      const s = Math.floor(left / 1000);
      el.textContent = 'expires in ' + (s >= 3600 ? Math.floor(s / 3600) + 'h ' : '') + pad(Math.floor((s % 3600) / 60)) + 'm ' + pad(s % 60) + 's';
    }
  }
  countdowns();
  setInterval(countdowns, 1000);

  const log = document.getElementById('event-log');
  if (!log) return;
  const ROW = 28;
  const viewport = log.querySelector('.viewport');
  const body = log.querySelector('tbody');
  const filters = log.querySelector('.types');
  const count = log.querySelector('.count');
  const status = document.getElementById('run-status');
  let all = [];
  let shown = [];
  const hidden = new Set();
  const known = new Set();
  let queued = false;
  let drawn = false;

  function cell(tr, text) { const td = document.createElement('td'); td.textContent = text; tr.appendChild(td); }
  function spacer(height) {
    const tr = document.createElement('tr');
    tr.className = 'spacer';
    tr.setAttribute('aria-hidden', 'true');
    tr.style.height = height + 'px';
    return tr;
  }
  function draw() {
    queued = false;
    const top = viewport.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - 15);
    const last = Math.min(shown.length, Math.ceil((top + viewport.clientHeight) / ROW) + 15);
    const rows = document.createDocumentFragment();
    rows.appendChild(spacer(first * ROW));
    for (let i = first; i < last; i++) {
      const e = shown[i];
      const tr = document.createElement('tr');
      tr.style.height = ROW + 'px';
      cell(tr, e.seq); cell(tr, e.type); cell(tr, e.text);
      rows.appendChild(tr);
    }
    rows.appendChild(spacer((shown.length - last) * ROW));
    body.replaceChildren(rows);
    if (!drawn && all.length > 0) { drawn = true; performance.mark('funduq-events-drawn'); }
    count.textContent = shown.length === all.length ? all.length + ' events' : shown.length + ' of ' + all.length + ' events shown';
  }
  function later() { if (!queued) { queued = true; requestAnimationFrame(draw); } }
  function refilter() { shown = hidden.size === 0 ? all : all.filter((e) => !hidden.has(e.type)); later(); }
  function learn(type) {
    if (known.has(type)) return;
    known.add(type);
    const label = document.createElement('label');
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = true;
    box.value = type;
    box.addEventListener('change', () => { if (box.checked) hidden.delete(type); else hidden.add(type); refilter(); });
    label.appendChild(box);
    label.appendChild(document.createTextNode(' ' + type));
    filters.appendChild(label);
  }
  function add(events) {
    const atEnd = viewport.scrollTop + viewport.clientHeight >= viewport.scrollHeight - ROW;
    for (const e of events) { learn(e.type); all.push(e); if (!hidden.has(e.type) && shown !== all) shown.push(e); }
    later();
    if (atEnd && log.dataset.live === '1') requestAnimationFrame(() => { viewport.scrollTop = viewport.scrollHeight; });
  }
  viewport.addEventListener('scroll', later, { passive: true });
  addEventListener('resize', later);
  const end = log.querySelector('.to-end');
  if (end) end.addEventListener('click', () => { viewport.scrollTop = viewport.scrollHeight; });

  async function load() {
    // The log a page at a time (5,000 events each): the first is drawn while the rest come.
    for (let after = 0; ; ) {
      const page = await (await fetch(log.dataset.src + '?after=' + after, { credentials: 'same-origin' })).json();
      add(page.events);
      if (page.next === undefined) break;
      after = page.next;
    }
  }
  load().then(() => {
    log.dataset.loaded = String(all.length);
    if (log.dataset.live !== '1') return;
    const source = new EventSource(log.dataset.stream + '?after=' + (all.length ? all[all.length - 1].seq : 0));
    source.onmessage = (message) => {
      const e = JSON.parse(message.data);
      add([e]);
      log.dataset.loaded = String(all.length);
      if (e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR') {
        source.close();
        if (status) status.textContent = e.type === 'RUN_ERROR' ? 'failed or cancelled' : 'completed';
      }
    };
  });
})();
`;

const STYLE = `
:root { color-scheme: light; font-family: system-ui, sans-serif; color: #1b1f24; background: #fff; }
body { margin: 0; }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem; padding: .5rem 1rem; background: #14324a; color: #fff; }
header a { color: #fff; }
.brand { font-weight: 700; text-decoration: none; }
nav ul { display: flex; gap: 1rem; list-style: none; margin: 0; padding: 0; }
nav a[aria-current=page] { text-decoration: underline 3px; }
header form { margin-left: auto; }
main { padding: 1rem; max-width: 80rem; }
.warning { margin: 0; padding: .5rem 1rem; background: #fff3cd; color: #5c4400; border-bottom: 1px solid #c9a227; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; width: 100%; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #d0d7de; vertical-align: top; }
td { overflow-wrap: anywhere; }
.status { font-weight: 600; }
.status.failed, .status.cancelled, .error { color: #a40e26; }
.status.completed { color: #116329; }
.inline { display: inline; }
form.filters, form.act { display: flex; flex-wrap: wrap; gap: .75rem; align-items: end; margin: .5rem 0 1rem; }
label { display: inline-flex; flex-direction: column; gap: .15rem; }
.types label { flex-direction: row; gap: .25rem; margin-right: .75rem; }
button { padding: .3rem .8rem; border: 1px solid #14324a; background: #fff; color: #14324a; border-radius: 4px; cursor: pointer; }
button.danger { border-color: #a40e26; color: #a40e26; }
input, select, textarea { font: inherit; padding: .2rem .3rem; }
.viewport { height: 28rem; overflow-y: auto; border: 1px solid #d0d7de; }
.viewport table { margin: 0; table-layout: fixed; }
.viewport td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.viewport th { position: sticky; top: 0; background: #f6f8fa; }
.spacer td { padding: 0; border: 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(22rem, 1fr)); gap: 1rem 2rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; padding: .5rem; }
.empty { color: #57606a; }
`;

/** A short digest of a text (FNV-1a): the asset's name changes with its content, so it can be cached for good. */
function digest(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}

export const ASSETS = {
  js: { path: `assets/console-${digest(SCRIPT)}.js`, body: SCRIPT, type: 'text/javascript; charset=utf-8' },
  css: { path: `assets/console-${digest(STYLE)}.css`, body: STYLE, type: 'text/css; charset=utf-8' },
};
