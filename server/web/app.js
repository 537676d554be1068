// Service Incident web page: play an incident over /ws, or replay an agent's run from a results file.
//
// A thin client of the same WebSocket protocol every client uses: one socket per tab (its own
// session), closed when the tab goes away. Everything from the server or a results file reaches the
// DOM as text (textContent, Text nodes, attribute values): never as HTML.
'use strict';

(() => {
  // ---- small DOM helpers ---------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'title', 'htmlFor', 'type', 'name', 'tabIndex']);

  // Build an element: props are attributes (set as text), `text` is textContent, `on*` are
  // listeners; string children become Text nodes.
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setProps(node, attrs);
    append(node, children);
    return node;
  }

  function setProps(node, props) {
    if (!props) return;
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.setAttribute('class', value);
      else if (key === 'text') node.textContent = String(value);
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (PROPS.has(key) && !(node instanceof SVGElement)) node[key] = value;
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  // ---- formatting ----------------------------------------------------------------------------

  const num = (value) => typeof value === 'number' && Number.isFinite(value);
  const signed = (value) => {
    if (!num(value)) return '–';
    const text = Math.abs(value) < 0.005 ? '0.00' : value.toFixed(2);
    return value > 0.005 ? `+${text}` : text;
  };
  const scoreText = (value) => (num(value) ? value.toFixed(4) : '–');
  const credit = (value) => (num(value) ? value.toFixed(3) : '–');
  const sign = (value) => (!num(value) || Math.abs(value) < 0.005 ? 'zero' : value > 0 ? 'pos' : 'neg');
  const clockText = (iso) => {
    const match = /T(\d\d:\d\d)/.exec(iso || '');
    return match ? `${match[1]} UTC` : iso || '–';
  };
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

  // An action as one token, as inference.py writes it: inspect_logs(db), declare(db+cache,P0).
  function describe(action) {
    if (!action) return 'no action';
    const targets = (action.targets || (action.target ? [action.target] : [])).concat(action.additional_targets || []);
    const args = targets.length ? [targets.join('+')] : [];
    if (action.severity) args.push(action.severity);
    return `${action.action}(${args.join(',')})`;
  }

  // ---- the WebSocket session -----------------------------------------------------------------

  // Server path prefix, so the page works wherever the app is mounted (/web/ -> '').
  const ROOT = location.pathname.replace(/\/web(\/[^/]*)?$/, '');
  const WS_URL = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${ROOT}/ws`;

  // One socket per tab. Frames are answered strictly in order (no request ids in the protocol),
  // so replies are matched to requests first-in, first-out; one request is in flight at a time.
  class Session {
    constructor(url) {
      this.url = url;
      this.socket = null;
      this.opening = null;
      this.waiting = [];
    }

    get open() {
      return this.socket !== null && this.socket.readyState === WebSocket.OPEN;
    }

    connect() {
      if (this.open) return Promise.resolve();
      if (this.opening) return this.opening;
      setConnection('connecting', 'connecting…');
      this.opening = new Promise((resolve, reject) => {
        const socket = new WebSocket(this.url);
        this.socket = socket;
        socket.addEventListener('open', () => {
          this.opening = null;
          setConnection('open', 'session open');
          resolve();
        });
        socket.addEventListener('message', (event) => this.receive(event.data));
        socket.addEventListener('close', (event) => {
          if (this.socket !== socket) return;
          this.socket = null;
          const why = event.reason ? `: ${event.reason}` : '';
          const error = new Error(`the connection closed (code ${event.code}${why})`);
          if (this.opening) {
            this.opening = null;
            reject(new Error(`could not connect to ${this.url}`));
          }
          for (const waiter of this.waiting.splice(0)) waiter.reject(error);
          setConnection('closed', `session closed${event.code === 1001 ? ' (idle)' : ''}`);
          onSessionClosed();
        });
      });
      return this.opening;
    }

    receive(text) {
      let frame;
      try {
        frame = JSON.parse(text);
      } catch {
        frame = { type: 'error', data: { message: 'the server sent a frame that is not JSON', code: 'CLIENT' } };
      }
      const waiter = this.waiting.shift();
      if (waiter) waiter.resolve(frame);
      else if (frame.type === 'error') flash(errorText(frame.data));
    }

    async request(message) {
      await this.connect();
      return new Promise((resolve, reject) => {
        this.waiting.push({ resolve, reject });
        this.socket.send(JSON.stringify(message));
      });
    }

    close() {
      const socket = this.socket;
      if (!socket) return;
      this.socket = null;
      if (socket.readyState === WebSocket.OPEN) {
        try {
          socket.send('{"type":"close"}');
        } catch {
          // already closing
        }
      }
      socket.close(1000);
    }
  }

  const errorText = (data) => `${(data && data.code) || 'ERROR'}: ${(data && data.message) || 'unknown error'}`;

  function setConnection(state, text) {
    const node = $('conn');
    node.dataset.state = state;
    node.textContent = text;
  }

  // ---- application state ---------------------------------------------------------------------

  const app = {
    mode: 'play',
    tasks: [],
    taskById: new Map(),
    session: new Session(WS_URL),
    busy: false,
    live: null, // the episode this tab plays: {kind, task, frames, index}
    replay: null, // the episode being replayed, same shape plus `record`
    records: [],
    selected: null,
    roots: new Set(),
  };

  const view = () => (app.mode === 'play' ? app.live : app.replay);

  // A frame is one point of an episode: the reset (index 0) or a step.
  // {obs, reward, done, action, text, error, reply}; obs is null for a step with no usable action.
  function frameObservation(episode, index) {
    for (let i = index; i >= 0; i--) if (episode.frames[i].obs) return episode.frames[i].obs;
    return null;
  }

  // ---- tasks and setup -----------------------------------------------------------------------

  const SUITES = { triage: 'Triage', generated: 'Generated', response: 'Response', rca: 'Root cause', holdout: 'Held out' };

  async function loadTasks() {
    const response = await fetch(`${ROOT}/tasks`, { cache: 'no-cache' });
    if (!response.ok) throw new Error(`GET /tasks answered ${response.status}`);
    app.tasks = await response.json();
    app.taskById = new Map(app.tasks.map((task) => [task.id, task]));
    const select = clear($('task'));
    const groups = new Map();
    for (const task of app.tasks) {
      if (!groups.has(task.suite)) {
        const group = h('optgroup', { label: SUITES[task.suite] || task.suite });
        groups.set(task.suite, group);
        select.append(group);
      }
      const label = `${task.id} · ${task.difficulty} · ${plural(task.max_steps, 'step')}`;
      groups.get(task.suite).append(h('option', { value: task.id, text: label }));
    }
  }

  function fillIncidents() {
    const task = app.taskById.get($('task').value);
    const select = clear($('incident'));
    if (!task) return;
    const drawn = task.generated ? 'new incident from the seed' : 'drawn by the seed';
    select.append(h('option', { value: '', text: drawn }));
    for (const id of task.incidents) {
      select.append(h('option', { value: id, text: task.generated ? `${id} (evaluation)` : id }));
    }
    $('task-about').textContent = task.description;
  }

  function applyQuery(params) {
    const task = params.get('task');
    if (task && app.taskById.has(task)) $('task').value = task;
    fillIncidents();
    const incident = params.get('incident');
    if (incident && [...$('incident').options].some((option) => option.value === incident)) {
      $('incident').value = incident;
    }
    const seed = params.get('seed');
    if (seed !== null && /^\d+$/.test(seed)) $('seed').value = seed;
  }

  // On the wire reward and done travel beside the observation; a results file keeps them inside.
  const observationOf = (payload) => ({ ...payload.observation, reward: payload.reward, done: payload.done });

  async function start() {
    const task = app.taskById.get($('task').value);
    if (!task) return;
    const seed = Number.parseInt($('seed').value, 10);
    const data = { task_id: task.id, seed: Number.isFinite(seed) && seed >= 0 ? seed : 0 };
    if ($('incident').value) data.incident_id = $('incident').value;
    flash(null);
    setBusy(true);
    try {
      const frame = await app.session.request({ type: 'reset', data });
      if (frame.type !== 'observation') {
        flash(frame.type === 'error' ? errorText(frame.data) : `unexpected ${frame.type} frame`);
        return;
      }
      const payload = frame.data;
      app.live = {
        kind: 'live',
        task,
        seed: data.seed,
        frames: [{ obs: observationOf(payload), reward: payload.reward, done: payload.done, action: null, text: 'reset' }],
        index: 0,
      };
      app.selected = null;
      app.roots = new Set();
      render();
    } catch (error) {
      flash(error.message);
    } finally {
      setBusy(false);
    }
  }

  async function act(action) {
    const episode = app.live;
    if (!episode || app.busy) return;
    const rationale = $('rationale').value.trim();
    if (rationale) action.rationale = rationale;
    flash(null);
    setBusy(true);
    try {
      const frame = await app.session.request({ type: 'step', data: action });
      if (frame.type === 'observation') {
        const payload = frame.data;
        const obs = observationOf(payload);
        episode.frames.push({
          obs,
          reward: payload.reward,
          done: payload.done,
          action,
          text: describe(action),
          error: obs.last_action_error,
        });
        episode.index = episode.frames.length - 1;
      } else {
        flash(frame.type === 'error' ? errorText(frame.data) : `unexpected ${frame.type} frame`);
      }
    } catch (error) {
      flash(error.message);
    } finally {
      setBusy(false);
      render();
    }
  }

  function onSessionClosed() {
    const episode = app.live;
    if (episode && !episode.frames[episode.frames.length - 1].done) {
      episode.lost = true;
      if (app.mode === 'play') flash('The session closed: start a new episode to play again.');
    }
    render();
  }

  function setBusy(busy) {
    app.busy = busy;
    document.body.classList.toggle('busy', busy);
    $('start').disabled = busy;
    if (app.mode === 'play') renderAct();
  }

  function flash(text) {
    const node = $('flash');
    node.textContent = text || '';
    show(node, Boolean(text));
  }

  // ---- rendering -----------------------------------------------------------------------------

  function render() {
    const episode = view();
    show($('setup'), app.mode === 'play');
    show($('replay-bar'), app.mode === 'replay');
    show($('episode'), Boolean(episode));
    if (!episode) return;
    const index = episode.index;
    const obs = frameObservation(episode, index);
    const frame = episode.frames[index];
    renderStatus(episode, obs, frame);
    renderResult(episode, obs);
    renderAlerts(obs);
    renderGraph(obs);
    renderServices(obs);
    show($('act'), episode.kind === 'live');
    show($('agent'), episode.kind === 'replay');
    if (episode.kind === 'live') renderAct();
    else renderAgent(episode, frame);
    renderLast(frame, obs);
    renderEvidence(episode, obs, frame);
    renderTimeline(episode);
    if (episode.kind === 'replay') renderReplayNav();
  }

  function renderStatus(episode, obs, frame) {
    $('title').textContent = obs.title;
    $('stat-incident').textContent = `${obs.task_id} / ${obs.incident_id}`;
    $('stat-step').textContent = `${obs.step_count} / ${obs.max_steps}`;
    const task = app.taskById.get(obs.task_id);
    const total = (task && task.sla_minutes) || Math.max(obs.sla_minutes_left, 1);
    $('stat-sla').textContent = `${obs.sla_minutes_left} min`;
    const bar = $('sla-bar');
    const fraction = Math.max(0, Math.min(1, obs.sla_minutes_left / total));
    bar.style.width = `${(fraction * 100).toFixed(1)}%`;
    bar.className = fraction > 0.5 ? 'ok' : fraction > 0.2 ? 'low' : 'out';
    const clock = $('stat-clock');
    clock.textContent = clockText(obs.clock);
    clock.title = obs.clock;
    const reward = $('stat-reward');
    reward.textContent = episode.index === 0 ? '–' : signed(frame.reward);
    reward.className = episode.index === 0 ? '' : sign(frame.reward);
    let sum = 0;
    for (let i = 1; i <= episode.index; i++) sum += num(episode.frames[i].reward) ? episode.frames[i].reward : 0;
    const ret = $('stat-return');
    ret.textContent = signed(sum);
    ret.className = sign(sum);
  }

  function renderResult(episode, obs) {
    const last = episode.index === episode.frames.length - 1;
    const record = episode.record;
    let score = obs && obs.done ? obs.score : null;
    let breakdown = obs && obs.done ? obs.breakdown : null;
    if (record && last && score === null) {
      score = record.graded === false ? null : record.score;
      breakdown = record.breakdown;
    }
    const visible = num(score) || (record && last && record.error);
    show($('result'), Boolean(visible));
    // Emptied on every step, so that stepping back through a replay leaves no postmortem behind.
    renderPostmortem(obs && obs.done ? obs.postmortem : null);
    if (!visible) return;
    $('score-value').textContent = scoreText(score);
    const note = clear($('score-note'));
    if (record && record.error) note.append(`ended without a grade: ${record.error}`);
    else note.append(`${plural(obs.step_count, 'step')} of ${obs.max_steps}`);
    const body = clear($('breakdown').tBodies[0]);
    const entries = Object.entries(breakdown || {});
    const scale = Math.max(0.3, ...entries.map(([, value]) => Math.abs(value)));
    for (const [name, value] of entries) {
      const bar = h('span', { class: `bar ${sign(value)}` });
      bar.style.width = `${Math.min(100, (Math.abs(value) / scale) * 100).toFixed(1)}%`;
      body.append(h('tr', null,
        h('th', { scope: 'row', text: name.replace(/_/g, ' ') }),
        h('td', { class: `val ${sign(value)}`, text: signed(value) }),
        h('td', { class: 'barcell' }, bar)));
    }
  }

  // What the episode's end revealed, from the last observation's postmortem alone (a held-out
  // episode has none): per root cause whether the answer named it, whether its fix was in effect at
  // the end and what each part of the score credited it; the severity graded beside the one
  // declared; and, for each part that fell short, what was missed.
  function renderPostmortem(report) {
    const box = clear($('postmortem'));
    show(box, Boolean(report));
    if (!report) return;
    const parts = [...new Set(report.root_causes.flatMap((root) => Object.keys(root.credited)))];
    const flag = (value) => h('td', { class: `flag ${value ? 'pos' : 'neg'}`, text: value ? 'yes' : 'no' });
    const labels = ['root cause', 'fault', 'fixes', 'named', 'fixed',
      ...parts.map((part) => `${part.replace(/_/g, ' ')} credited`)];
    const rows = report.root_causes.map((root) => h('tr', { dataset: { service: root.service } },
      h('th', { scope: 'row', text: root.service }),
      h('td', { text: root.fault }),
      h('td', { text: root.fixes.join(', ') }),
      flag(root.named),
      flag(root.fixed),
      parts.map((part) => h('td', { class: `val ${sign(root.credited[part])}`, text: credit(root.credited[part]) }))));
    box.append(h('div', { class: 'table-wrap' }, h('table', { class: 'roots' },
      h('thead', null, h('tr', null, labels.map((label) => h('th', { scope: 'col', text: label })))),
      h('tbody', null, rows))));
    if (report.severity) {
      box.append(h('div', { class: 'pm-severity' },
        h('b', { text: 'severity expected: ' }), h('span', { class: 'expected', text: report.severity }),
        `, declared ${report.declared_severity || 'none'}. ${report.severity_basis}`));
    }
    const lines = [['declared', report.declared.join(', ') || 'nothing']];
    for (const [part, why] of Object.entries(report.missed)) lines.push([`missed: ${part.replace(/_/g, ' ')}`, why]);
    for (const [label, text] of lines) box.append(h('div', null, h('b', { text: `${label}: ` }), text));
  }

  function renderAlerts(obs) {
    const list = clear($('alerts'));
    const firing = obs.alerts.filter((alert) => alert.status === 'firing').length;
    $('alert-count').textContent = obs.alerts.length ? `${firing} firing, ${obs.alerts.length - firing} resolved` : '';
    if (!obs.alerts.length) list.append(h('li', { class: 'empty', text: 'No alert.' }));
    for (const alert of obs.alerts) {
      list.append(h('li', { class: `alert lvl-${alert.level} ${alert.status}` },
        h('div', { class: 'alert-head' },
          h('span', { class: `badge ${alert.level}`, text: alert.level }),
          h('span', { class: `status ${alert.status}`, text: alert.status }),
          h('button', { type: 'button', class: 'link svc', text: alert.service, onclick: () => select(alert.service) }),
          h('span', { class: 'since', text: `since ${clockText(alert.since)}`, title: alert.since })),
        h('div', { class: 'alert-summary', text: alert.summary })));
    }
  }

  // A service's pod status as its last health check printed it, else unknown: told in the node's
  // title, never drawn as a colour (the page no more judges a service than the views do).
  function serviceStatus(obs, name) {
    const health = obs.visible_health && obs.visible_health[name];
    const match = health ? /status=(\w+)/.exec(health) : null;
    return match ? match[1] : 'unknown';
  }

  function alertLevel(obs, name) {
    const firing = obs.alerts.filter((alert) => alert.service === name && alert.status === 'firing');
    if (firing.some((alert) => alert.level === 'critical')) return 'critical';
    return firing.length ? 'warning' : null;
  }

  // Layered layout: callers above their dependencies, each service one layer below its deepest
  // caller; layers wider than the box wrap onto more rows.
  const NODE_W = 148;
  const NODE_H = 46;
  const GAP_X = 16;
  const ROW_H = 80;

  function layout(topology, columns) {
    const names = topology.map((card) => card.name);
    const known = new Set(names);
    const callers = new Map(names.map((name) => [name, []]));
    for (const card of topology) {
      for (const dep of card.depends_on) if (known.has(dep) && dep !== card.name) callers.get(dep).push(card.name);
    }
    const depth = new Map();
    const visiting = new Set();
    const depthOf = (name) => {
      if (depth.has(name)) return depth.get(name);
      if (visiting.has(name)) return 0; // a cycle: break it
      visiting.add(name);
      const above = callers.get(name).map((caller) => depthOf(caller) + 1);
      visiting.delete(name);
      const value = above.length ? Math.max(...above) : 0;
      depth.set(name, value);
      return value;
    };
    names.forEach(depthOf);
    const layers = [];
    for (const name of names) (layers[depthOf(name)] ||= []).push(name);
    const order = new Map();
    const rows = [];
    for (const layer of layers.filter(Boolean)) {
      // Order by where the callers sit, to keep edges short and crossings few.
      const weight = (name) => {
        const places = callers.get(name).filter((caller) => order.has(caller)).map((caller) => order.get(caller));
        return places.length ? places.reduce((a, b) => a + b, 0) / places.length : names.indexOf(name);
      };
      const sorted = layer.map((name) => [name, weight(name)]).sort((a, b) => a[1] - b[1]).map(([name]) => name);
      for (let i = 0; i < sorted.length; i += columns) rows.push(sorted.slice(i, i + columns));
      sorted.forEach((name, i) => order.set(name, i));
    }
    const widest = Math.max(1, ...rows.map((row) => row.length));
    const width = widest * NODE_W + (widest - 1) * GAP_X + 8;
    const positions = new Map();
    rows.forEach((row, r) => {
      const rowWidth = row.length * NODE_W + (row.length - 1) * GAP_X;
      const left = (width - rowWidth) / 2;
      row.forEach((name, i) => positions.set(name, { x: left + i * (NODE_W + GAP_X), y: 4 + r * ROW_H }));
    });
    return { positions, width, height: rows.length * ROW_H - (ROW_H - NODE_H) + 8 };
  }

  function renderGraph(obs) {
    const box = clear($('graph'));
    const topology = obs.topology && obs.topology.length
      ? obs.topology
      : obs.services.map((name) => ({ name, kind: '', depends_on: [], user_facing: false }));
    const room = box.clientWidth || 640;
    const columns = Math.max(2, Math.floor((room + GAP_X) / (NODE_W + GAP_X)));
    const { positions, width, height } = layout(topology, columns);
    const graph = s('svg', {
      viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', class: 'topology',
      'aria-label': `Dependency graph of ${plural(topology.length, 'service')}`,
    });
    graph.append(s('defs', null,
      s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));
    const edges = s('g', { class: 'edges' });
    for (const card of topology) {
      const from = positions.get(card.name);
      for (const dep of card.depends_on) {
        const to = positions.get(dep);
        if (!from || !to) continue;
        const x1 = from.x + NODE_W / 2;
        const y1 = from.y + NODE_H;
        const x2 = to.x + NODE_W / 2;
        const y2 = to.y;
        const bend = Math.max(18, (y2 - y1) / 2);
        const near = app.selected === card.name || app.selected === dep;
        edges.append(s('path', {
          d: `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2 - 1}`,
          class: near ? 'edge near' : 'edge', 'marker-end': 'url(#arrow)',
        }, s('title', null, `${card.name} calls ${dep}`)));
      }
    }
    graph.append(edges);
    for (const card of topology) {
      const at = positions.get(card.name);
      const status = serviceStatus(obs, card.name);
      const level = alertLevel(obs, card.name);
      const classes = ['node'];
      if (level) classes.push(`alert-${level}`);
      if (app.selected === card.name) classes.push('selected');
      const name = card.name.length > 19 ? `${card.name.slice(0, 18)}…` : card.name;
      const detail = [card.kind, card.user_facing ? 'user-facing' : null].filter(Boolean).join(' · ');
      const node = s('g', {
        class: classes.join(' '), transform: `translate(${at.x},${at.y})`, tabindex: 0, role: 'button',
        'data-service': card.name, 'aria-label': `${card.name}: ${detail}, ${status}${level ? `, ${level} alert` : ''}`,
      },
      s('title', null, `${card.name} (${detail || 'service'}): ${status}`),
      s('rect', { width: NODE_W, height: NODE_H, rx: 8, ry: 8 }),
      s('text', { x: 10, y: 19, class: 'name' }, name),
      s('text', { x: 10, y: 36, class: 'kind' }, detail || ' '));
      if (card.user_facing) node.append(s('circle', { cx: NODE_W - 11, cy: 11, r: 4, class: 'uf' }));
      if (level) node.append(s('circle', { cx: NODE_W - 11, cy: NODE_H - 11, r: 4, class: `dot ${level}` }));
      node.addEventListener('click', () => select(card.name));
      node.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          select(card.name);
        }
      });
      graph.append(node);
    }
    box.append(graph);
  }

  function renderServices(obs) {
    const list = clear($('service-list'));
    const kinds = new Map((obs.topology || []).map((card) => [card.name, card]));
    for (const name of obs.services) {
      const card = kinds.get(name);
      list.append(h('button', {
        type: 'button', role: 'option', class: 'chip', 'aria-selected': String(app.selected === name),
        dataset: { service: name }, title: card ? `${card.kind}${card.user_facing ? ', user-facing' : ''}` : name,
        onclick: () => select(name),
      }, name));
    }
  }

  function select(name) {
    app.selected = name;
    render();
  }

  // ---- acting --------------------------------------------------------------------------------

  const TARGET_ACTIONS = [
    ['inspect_logs', 'Inspect logs', 'look'],
    ['inspect_metrics', 'Inspect metrics', 'look'],
    ['check_health', 'Check health', 'look'],
    ['inspect_deploys', 'Deploys', 'look'],
    ['run_db_query', 'DB query', 'look'],
    ['inspect_traces', 'Traces', 'look'],
    ['restart', 'Restart', 'fix'],
    ['rollback', 'Roll back', 'fix'],
    ['scale_up', 'Scale up', 'fix'],
    ['escalate', 'Escalate', 'fix'],
    ['failover', 'Fail over', 'fix'],
    ['expand_volume', 'Grow volume', 'fix'],
    ['renew_certificate', 'Renew cert', 'fix'],
    ['shed_load', 'Shed load', 'fix'],
    ['terminate_blocker', 'End blocker', 'fix'],
    ['resync_clock', 'Resync clock', 'fix'],
  ];

  function renderAct() {
    const episode = app.live;
    if (!episode) return;
    const obs = frameObservation(episode, episode.index);
    const task = episode.task;
    const over = Boolean(obs.done) || Boolean(episode.lost);
    const allowed = new Set(obs.available_actions && obs.available_actions.length ? obs.available_actions : task.actions);
    const card = (obs.topology || []).find((entry) => entry.name === app.selected);
    $('selected').textContent = app.selected || 'no service selected';
    $('selected').classList.toggle('none', !app.selected);

    const buttons = clear($('target-actions'));
    for (const [name, label, kind] of TARGET_ACTIONS) {
      if (!allowed.has(name)) continue;
      const notDb = name === 'run_db_query' && card && card.kind !== 'database' && card.kind !== 'queue';
      buttons.append(h('button', {
        type: 'button', class: `act ${kind}`, dataset: { action: name }, text: label,
        disabled: over || app.busy || !app.selected || notDb,
        title: notDb ? `${app.selected} is not a database or queue` : `${name}(${app.selected || '…'})`,
        onclick: () => act({ action: name, target: app.selected }),
      }));
    }

    const declares = allowed.has('declare') || allowed.has('declare_rca');
    show($('declare'), declares || allowed.has('resolve'));
    const checks = clear($('rc-list'));
    for (const name of obs.services) {
      checks.append(h('label', { class: 'check' },
        h('input', {
          type: 'checkbox', value: name, checked: app.roots.has(name), disabled: over || app.busy,
          onchange: (event) => {
            if (event.target.checked) app.roots.add(name);
            else app.roots.delete(name);
            renderAct();
          },
        }),
        h('span', { text: name })));
    }
    show(checks, declares);
    show($('severity'), allowed.has('declare'));
    show($('declare').querySelector('.rubric'), allowed.has('declare'));
    show($('declare').querySelector('.subhead'), declares);
    for (const radio of document.querySelectorAll('input[name="severity"]')) radio.disabled = over || app.busy;

    const roots = obs.services.filter((name) => app.roots.has(name));
    const finals = clear($('final-actions'));
    if (allowed.has('declare')) {
      finals.append(h('button', {
        type: 'button', class: 'act final', dataset: { action: 'declare' },
        text: roots.length ? `Declare ${roots.join(' + ')} ${severity()}` : 'Declare (tick the root cause)',
        disabled: over || app.busy || !roots.length,
        onclick: () => act({ action: 'declare', target: roots[0], severity: severity(), additional_targets: roots.slice(1) }),
      }));
    }
    if (allowed.has('declare_rca')) {
      finals.append(h('button', {
        type: 'button', class: 'act final', dataset: { action: 'declare_rca' },
        text: roots.length ? `Declare root causes: ${roots.join(', ')}` : 'Declare root causes (tick them)',
        disabled: over || app.busy || !roots.length,
        onclick: () => act({ action: 'declare_rca', targets: roots }),
      }));
    }
    if (allowed.has('resolve')) {
      finals.append(h('button', {
        type: 'button', class: 'act final resolve', dataset: { action: 'resolve' }, text: 'Resolve incident',
        disabled: over || app.busy, onclick: () => act({ action: 'resolve' }),
      }));
    }
    show($('rationale-req'), Boolean(task.rationale_required));
    $('rationale').disabled = over;
  }

  function severity() {
    const checked = document.querySelector('input[name="severity"]:checked');
    return checked ? checked.value : 'P1';
  }

  function renderAgent(episode, frame) {
    const text = clear($('agent-action'));
    const record = episode.record;
    if (episode.index === 0) {
      text.append(`Reset: ${record.task} / ${record.incident}, seed ${record.seed}. Agent: ${record.agent}.`);
    } else {
      text.append(h('span', null, `Step ${episode.index}: `, h('code', { text: frame.text || describe(frame.action) }),
        ' → reward ', h('b', { class: sign(frame.reward), text: signed(frame.reward) })));
      if (frame.action && frame.action.rationale) {
        text.append(h('span', { class: 'why' }, 'Rationale: ', frame.action.rationale));
      }
      if (frame.error) text.append(h('span', { class: 'err', text: `Error: ${frame.error}` }));
    }
    show($('agent-reply-box'), Boolean(frame.reply));
    $('agent-reply').textContent = frame.reply || '';
  }

  function renderLast(frame, obs) {
    $('message').textContent = obs.message;
    const error = $('action-error');
    const problem = frame.obs ? obs.last_action_error : frame.error;
    error.textContent = problem ? `Action refused: ${problem}` : '';
    show(error, Boolean(problem));
    const diagnostic = $('diagnostic');
    diagnostic.textContent = obs.last_diagnostic || '';
    show(diagnostic, Boolean(obs.last_diagnostic));
  }

  // ---- evidence ------------------------------------------------------------------------------

  const LEVEL = /\b(TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERR(?:OR)?|CRIT(?:ICAL)?|FATAL|ALERT|EMERG|PANIC)\b/;
  const STAMP = /^(\d{4}-\d\d-\d\dT[\d:.]+Z?)(\s+)/;
  const LEVEL_CLASS = {
    TRACE: 'debug', DEBUG: 'debug', INFO: 'info', NOTICE: 'info', WARN: 'warn', WARNING: 'warn',
    ERR: 'error', ERROR: 'error', CRIT: 'crit', CRITICAL: 'crit', FATAL: 'crit', ALERT: 'crit', EMERG: 'crit', PANIC: 'crit',
  };

  function logView(text) {
    const pre = h('pre', { class: 'log' });
    for (const line of String(text).split('\n')) {
      const row = h('span', { class: 'line' });
      let rest = line;
      const stamp = STAMP.exec(rest);
      if (stamp) {
        row.append(h('span', { class: 'ts', text: stamp[1] }), stamp[2]);
        rest = rest.slice(stamp[0].length);
      }
      const level = LEVEL.exec(rest);
      if (level) {
        const kind = LEVEL_CLASS[level[1]];
        row.classList.add(`l-${kind}`);
        row.append(rest.slice(0, level.index), h('span', { class: `lvl lvl-${kind}`, text: level[1] }),
          rest.slice(level.index + level[1].length));
      } else {
        row.append(rest);
      }
      pre.append(row, '\n');
    }
    return pre;
  }

  const METRICS = [
    ['p99_ms', 'p99', (v) => `${Math.round(v)} ms`],
    ['p50_ms', 'p50', (v) => `${Math.round(v)} ms`],
    ['error_rate', 'Errors', (v) => `${(v * 100).toFixed(1)}%`],
    ['rps', 'Req/s', (v) => v.toFixed(1)],
    ['cpu_pct', 'CPU', (v) => `${v.toFixed(1)}%`],
    ['memory_pct', 'Memory', (v) => `${v.toFixed(1)}%`],
  ];

  // Each service's metrics over the episode so far: a point whenever they were looked at again or
  // changed. The server shows the latest reading only; the trend is kept here.
  function metricHistory(episode, upto) {
    const history = new Map();
    for (let i = 0; i <= upto; i++) {
      const frame = episode.frames[i];
      if (!frame.obs) continue;
      for (const [service, reading] of Object.entries(frame.obs.visible_metrics || {})) {
        if (!history.has(service)) history.set(service, []);
        const points = history.get(service);
        const last = points[points.length - 1];
        const looked = frame.action && frame.action.action === 'inspect_metrics' && frame.action.target === service;
        const changed = !last || METRICS.some(([key]) => last.reading[key] !== reading[key]);
        const taken = ((frame.obs.as_of || {}).metrics || {})[service];
        if (changed || looked) points.push({ step: frame.obs.step_count, taken, reading });
      }
    }
    return history;
  }

  // When the latest reading was taken: its minute (the step's where an older record has none).
  function seenCell(points) {
    const last = points[points.length - 1];
    const text = last.taken ? `as of ${last.taken}` : `step ${last.step}`;
    return h('td', { class: 'seen', text, title: `${plural(points.length, 'reading')}, the latest at step ${last.step}` });
  }

  function sparkline(values) {
    const width = 44;
    const height = 14;
    const low = Math.min(...values);
    const high = Math.max(...values);
    const span = high - low || 1;
    const points = values.map((value, i) => {
      const x = (i / (values.length - 1)) * (width - 2) + 1;
      const y = high === low ? height / 2 : height - 1 - ((value - low) / span) * (height - 2);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    return s('svg', { class: 'spark', viewBox: `0 0 ${width} ${height}`, width, height, 'aria-hidden': 'true' },
      s('polyline', { points: points.join(' ') }));
  }

  function metricCell(points, key, format) {
    const values = points.map((point) => point.reading[key]).filter(num);
    const cell = h('td', { class: 'metric' });
    if (!values.length) return cell;
    const current = values[values.length - 1];
    cell.append(h('span', { class: 'value', text: format(current) }));
    if (values.length > 1) {
      const previous = values[values.length - 2];
      const delta = current - previous;
      const flat = Math.abs(delta) <= Math.max(Math.abs(previous), 1) * 0.01;
      // Every one of these signals is worse when it rises.
      const trend = flat ? ['flat', '→'] : delta > 0 ? ['up', '↑'] : ['down', '↓'];
      cell.append(h('span', { class: `trend ${trend[0]}`, text: trend[1], title: `was ${format(previous)}` }),
        sparkline(values));
    }
    return cell;
  }

  const INSPECTIONS = new Set(['inspect_logs', 'inspect_metrics', 'check_health', 'inspect_deploys', 'run_db_query',
    'inspect_traces']);

  // A view's heading: its service and the minute it was taken, so a view from an earlier step never reads as current.
  function blockHead(obs, view, name) {
    const taken = ((obs.as_of || {})[view] || {})[name];
    return h('div', { class: 'block-head', text: name }, taken ? h('span', { class: 'as-of', text: ` · as of ${taken}` }) : null);
  }

  function renderEvidence(episode, obs, frame) {
    const fresh = frame.action && INSPECTIONS.has(frame.action.action) ? frame.action.target : null;
    const order = (names) => {
      const list = names.filter((name) => obs.services.includes(name));
      const extra = names.filter((name) => !obs.services.includes(name));
      const sorted = obs.services.filter((name) => list.includes(name)).concat(extra);
      return fresh && sorted.includes(fresh) ? [fresh, ...sorted.filter((name) => name !== fresh)] : sorted;
    };
    const sections = [];

    const dashboard = Object.entries(obs.dashboard || {});
    const dash = clear($('dashboard'));
    for (const [name, signals] of dashboard) {
      dash.append(h('span', { class: 'chip' }, h('b', { text: name }), ` ${signals}`));
    }
    show($('dashboard-box'), dashboard.length > 0);
    sections.push(dashboard.length > 0);

    const history = metricHistory(episode, episode.index);
    const table = clear($('metrics'));
    table.append(h('thead', null, h('tr', null, h('th', { text: 'Service' }),
      METRICS.map(([, label]) => h('th', { text: label })), h('th', { text: 'Seen' }))));
    const body = h('tbody');
    for (const service of order([...history.keys()])) {
      const points = history.get(service);
      body.append(h('tr', { class: service === fresh ? 'fresh' : null },
        h('th', { scope: 'row', text: service }),
        METRICS.map(([key, , format]) => metricCell(points, key, format)),
        seenCell(points)));
    }
    table.append(body);
    show($('metrics-box'), history.size > 0);
    sections.push(history.size > 0);

    const logs = clear($('logs'));
    const logNames = order(Object.keys(obs.visible_logs || {}));
    for (const name of logNames) {
      logs.append(h('div', { class: `block${name === fresh ? ' fresh' : ''}`, dataset: { service: name } },
        blockHead(obs, 'logs', name), logView(obs.visible_logs[name])));
    }
    show($('logs-box'), logNames.length > 0);
    sections.push(logNames.length > 0);

    const views = [['visible_health', 'health'], ['visible_deploys', 'deploys'], ['visible_db', 'db'],
      ['visible_traces', 'traces']];
    for (const [field, id] of views) {
      const box = clear($(id));
      const names = order(Object.keys(obs[field] || {}));
      for (const name of names) {
        box.append(h('div', { class: `block${name === fresh ? ' fresh' : ''}`, dataset: { service: name } },
          blockHead(obs, id, name), h('pre', { class: 'mono text', text: obs[field][name] })));
      }
      show($(`${id}-box`), names.length > 0);
      sections.push(names.length > 0);
    }
    show($('evidence-empty'), !sections.some(Boolean));
  }

  function renderTimeline(episode) {
    const list = clear($('timeline'));
    episode.frames.forEach((frame, index) => {
      const obs = frame.obs;
      const current = index === episode.index;
      const item = h('li', {
        class: `${current ? 'current' : ''} ${frame.error ? 'refused' : ''}`.trim() || null,
        dataset: { step: index },
      });
      if (index === 0) {
        item.append(h('span', { class: 'step', text: '0' }), h('span', { class: 'what', text: 'paged' }));
      } else {
        item.append(h('span', { class: 'step', text: String(index) }), h('code', { class: 'what', text: frame.text }),
          h('span', { class: `reward ${sign(frame.reward)}`, text: signed(frame.reward) }));
      }
      const note = frame.error ? frame.error : obs ? obs.message : '';
      if (note) item.append(h('div', { class: frame.error ? 'note err' : 'note', text: note }));
      if (episode.kind === 'replay') {
        item.tabIndex = 0;
        item.addEventListener('click', () => goTo(index));
      }
      list.append(item);
    });
    // Keep the current step in sight inside the list, without scrolling the page.
    const current = list.querySelector('li.current');
    if (current) {
      const top = current.offsetTop;
      if (top < list.scrollTop || top + current.offsetHeight > list.scrollTop + list.clientHeight) {
        list.scrollTop = Math.max(0, top - list.clientHeight + current.offsetHeight + 8);
      }
    }
  }

  // ---- replay --------------------------------------------------------------------------------

  // inference.py writes JSON Lines, one episode record a line; a JSON array or a single record is
  // read too.
  function parseResults(text) {
    const trimmed = text.trim();
    if (!trimmed) throw new Error('the file is empty');
    let records;
    try {
      const whole = JSON.parse(trimmed);
      records = Array.isArray(whole) ? whole : Array.isArray(whole.episodes) ? whole.episodes : [whole];
    } catch {
      records = trimmed.split(/\r?\n/).filter((line) => line.trim()).map((line, i) => {
        try {
          return JSON.parse(line);
        } catch (error) {
          throw new Error(`line ${i + 1} is not JSON (${error.message})`);
        }
      });
    }
    const usable = records.filter((record) => record && typeof record === 'object' && record.reset && Array.isArray(record.trace));
    if (!usable.length) {
      throw new Error('no episode with observations here: expected the episodes.jsonl that inference.py writes');
    }
    return usable;
  }

  function episodeFromRecord(record) {
    const frames = [{ obs: record.reset, reward: 0, done: false, action: null, text: 'reset' }];
    for (const step of record.trace) {
      frames.push({
        obs: step.observation || null,
        reward: step.reward,
        done: step.done,
        action: step.action || null,
        text: step.action_text || describe(step.action),
        error: step.error || null,
        reply: step.reply || null,
      });
    }
    return { kind: 'replay', task: app.taskById.get(record.task) || null, record, frames, index: 0 };
  }

  function loadRecords(text, source, wanted) {
    app.records = parseResults(text);
    const select = clear($('replay-episode'));
    app.records.forEach((record, i) => {
      const name = record.name || `${record.task}/${record.incident}`;
      select.append(h('option', { value: String(i), text: `${name} · ${record.agent || 'agent'} · score ${scoreText(record.score)}` }));
    });
    select.disabled = false;
    let index = 0;
    if (wanted !== null && wanted !== undefined && wanted !== '') {
      const byName = app.records.findIndex((record) => record.name === wanted);
      index = byName >= 0 ? byName : /^\d+$/.test(wanted) && Number(wanted) < app.records.length ? Number(wanted) : 0;
    }
    select.value = String(index);
    $('replay-about').textContent = `${source}: ${plural(app.records.length, 'episode')}.`;
    openRecord(index);
  }

  function openRecord(index) {
    const record = app.records[index];
    app.replay = episodeFromRecord(record);
    app.selected = null;
    flash(null);
    render();
  }

  function goTo(index) {
    const episode = app.replay;
    if (!episode) return;
    episode.index = Math.max(0, Math.min(episode.frames.length - 1, index));
    render();
  }

  function renderReplayNav() {
    const episode = app.replay;
    const last = episode.frames.length - 1;
    const slider = $('replay-slider');
    slider.max = String(last);
    slider.value = String(episode.index);
    slider.disabled = last === 0;
    $('replay-prev').disabled = episode.index === 0;
    $('replay-next').disabled = episode.index === last;
    const record = episode.record;
    const about = clear($('replay-about'));
    about.append(`${record.name || record.incident} · ${record.agent || 'agent'} · step ${episode.index} of ${last} · score ${scoreText(record.score)}`);
    if (record.error) about.append(h('span', { class: 'err', text: ` · ${record.error}` }));
  }

  async function openUrl(url, wanted) {
    flash(null);
    try {
      const response = await fetch(url, { cache: 'no-cache' });
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`.trim());
      loadRecords(await response.text(), url, wanted);
    } catch (error) {
      flash(`Could not open ${url}: ${error.message}`);
    }
  }

  function setMode(mode) {
    app.mode = mode;
    $('mode-play').setAttribute('aria-pressed', String(mode === 'play'));
    $('mode-replay').setAttribute('aria-pressed', String(mode === 'replay'));
    flash(null);
    app.selected = null;
    render();
  }

  // ---- wiring --------------------------------------------------------------------------------

  function wire() {
    $('mode-play').addEventListener('click', () => setMode('play'));
    $('mode-replay').addEventListener('click', () => setMode('replay'));
    $('task').addEventListener('change', fillIncidents);
    $('seed-random').addEventListener('click', () => {
      $('seed').value = String(Math.floor(Math.random() * 1000000));
    });
    $('start').addEventListener('click', start);
    for (const radio of document.querySelectorAll('input[name="severity"]')) radio.addEventListener('change', renderAct);
    $('replay-file').addEventListener('change', async (event) => {
      const file = event.target.files && event.target.files[0];
      if (!file) return;
      try {
        loadRecords(await file.text(), file.name, null);
      } catch (error) {
        flash(`Could not read ${file.name}: ${error.message}`);
      }
    });
    $('replay-load').addEventListener('click', () => {
      const url = $('replay-url').value.trim();
      if (url) openUrl(url, null);
    });
    $('replay-url').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') $('replay-load').click();
    });
    $('replay-episode').addEventListener('change', (event) => openRecord(Number(event.target.value)));
    $('replay-prev').addEventListener('click', () => goTo(app.replay.index - 1));
    $('replay-next').addEventListener('click', () => goTo(app.replay.index + 1));
    $('replay-slider').addEventListener('input', (event) => goTo(Number(event.target.value)));
    document.addEventListener('keydown', (event) => {
      if (app.mode !== 'replay' || !app.replay) return;
      const tag = event.target && event.target.tagName;
      if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') return;
      if (event.key === 'ArrowLeft') goTo(app.replay.index - 1);
      else if (event.key === 'ArrowRight') goTo(app.replay.index + 1);
    });
    let width = window.innerWidth;
    window.addEventListener('resize', () => {
      if (window.innerWidth !== width && view()) {
        width = window.innerWidth;
        render();
      }
    });
    // Leaving or reloading the tab ends its session at once, so no slot is held until a timeout.
    window.addEventListener('pagehide', () => app.session.close());
  }

  async function main() {
    wire();
    const params = new URLSearchParams(location.search);
    try {
      await loadTasks();
      applyQuery(params);
    } catch (error) {
      flash(`Could not load the task list: ${error.message}`);
    }
    const replay = params.get('replay');
    if (replay) {
      $('replay-url').value = replay;
      setMode('replay');
      await openUrl(replay, params.get('episode'));
    } else {
      render();
    }
    document.body.dataset.ready = 'true';
  }

  main();
})();
