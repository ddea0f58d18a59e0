// The live page of a run: it follows /runs/<task>/events (Server-Sent
// Events) and writes what arrives into the page. Text is only ever set as
// textContent: whatever the agent wrote stays text.
(function () {
  'use strict';
  const task = document.body.dataset.task;
  const $ = (id) => document.getElementById(id);
  const log = $('log');
  const status = $('status-line');
  // Arrival time of each line by its number, for the tests' and the
  // benchmark's measurements (read over CDP).
  window.liveArrivals = {};
  let stage = '';
  let group = null;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function figures(ev) {
    if (ev.step) $('steps').textContent = ev.step;
    if (ev.tool_calls) $('tool-calls').textContent = ev.tool_calls;
    if (ev.tokens) $('tokens').textContent = ev.tokens;
    if (ev.cost_usd) $('cost').textContent = '$' + ev.cost_usd.toFixed(2);
  }

  function line(ev) {
    if (ev.stage !== stage) {
      stage = ev.stage;
      $('stage').textContent = stage;
      const li = el('li', 'stage');
      li.dataset.stage = stage;
      li.appendChild(el('h3', '', stage));
      group = el('ul', 'steps');
      li.appendChild(group);
      log.appendChild(li);
    }
    const item = el('li', 'step ' + (ev.kind || 'note'));
    item.dataset.seq = ev.seq;
    item.appendChild(el('time', '', new Date(ev.t).toLocaleTimeString()));
    if (ev.kind === 'tool') {
      item.appendChild(el('code', 'tool', ev.tool));
      if (ev.detail) item.appendChild(el('span', 'args', ev.detail));
    } else if (ev.kind === 'text') {
      item.appendChild(el('p', 'text', ev.detail));
    } else {
      item.appendChild(el('span', 'message', ev.message));
      if (ev.detail) item.appendChild(el('pre', 'output', ev.detail));
    }
    group.appendChild(item);
    if (ev.stage === 'browser' && /^dev server up/.test(ev.message || '') && document.body.dataset.live === 'true') {
      $('preview-link').hidden = false;
    }
  }

  function receipt(r) {
    const box = $('receipt');
    box.hidden = false;
    box.replaceChildren(el('h2', '', 'Receipt'));
    const t = el('table', 'receipt');
    const row = (k, v, id) => {
      const tr = el('tr');
      tr.appendChild(el('th', '', k));
      const td = el('td', '', v);
      if (id) td.id = id;
      tr.appendChild(td);
      t.appendChild(tr);
    };
    row('Status', r.status, 'r-status');
    if (r.duration_seconds) row('Duration', Math.round(r.duration_seconds) + ' s');
    row('Cost', '$' + (r.cost_usd || 0).toFixed(2), 'r-cost');
    row('Tokens', (r.input_tokens || 0) + ' in / ' + (r.output_tokens || 0) + ' out');
    row('Steps', String(r.steps || 0));
    if (r.branch) row('Branch', r.branch);
    if (r.error) row('Error', r.error);
    (r.checks || []).forEach((c) => row('check ' + c.name, (c.passed ? 'passed' : 'failed') + ', ' + c.attempts + ' attempt(s)'));
    box.appendChild(t);
    if (r.note) box.appendChild(el('p', '', r.note));
  }

  const es = new EventSource('/runs/' + encodeURIComponent(task) + '/events');
  es.onopen = () => {
    window.liveOpened = window.liveOpened || performance.timeOrigin + performance.now();
    status.textContent = 'Live: lines appear as the run writes them.';
  };
  es.onerror = () => { if (es.readyState !== EventSource.CLOSED) status.textContent = 'Reconnecting…'; };
  es.addEventListener('progress', (m) => {
    const ev = JSON.parse(m.data);
    window.liveArrivals[ev.seq] = performance.timeOrigin + performance.now();
    window.liveTimes = window.liveTimes || {};
    window.liveTimes[ev.seq] = [ev.tu, ev.read];
    line(ev);
    figures(ev);
  });
  es.addEventListener('frame', (m) => {
    const f = JSON.parse(m.data);
    $('screencast-box').hidden = false;
    $('screencast').src = 'data:image/jpeg;base64,' + f.data;
    window.liveFrames = (window.liveFrames || 0) + 1;
  });
  es.addEventListener('receipt', (m) => receipt(JSON.parse(m.data)));
  es.addEventListener('end', () => {
    es.close();
    $('state').textContent = 'ended';
    $('preview-link').hidden = true;
    document.body.dataset.live = 'false';
    status.textContent = 'The run has ended.';
  });
})();
