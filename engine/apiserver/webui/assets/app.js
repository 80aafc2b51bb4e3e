// app.js: Setpoint's web UI. Routes (in the URL hash):
//   #/                                    kinds and plugins
//   #/k/{group|core}/{version}/{plural}    a live table of a kind's objects
//   #/k/{group|core}/{version}/{plural}/{namespace|_}/{name}   one object
import { Client, APIError, watch, objectKey, resourcePath } from './setpoint.js';
import { toYAML } from './yaml.js';
import { followLog } from './pluginlog.js';
import { h } from './dom.js';
import { openEditor, editableYAML, newObjectYAML } from './editor.js';

const TOKEN_KEY = 'setpoint.token';
const NAMESPACE_KEY = 'setpoint.namespace';
const TABLE_ACCEPT = 'application/json;as=Table;v=v1;g=meta.k8s.io, application/json';
const $ = (id) => document.getElementById(id);

function age(ts, now = Date.now()) {
  if (!ts) return '';
  let s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  if (s < 120) return `${s}s`;
  let m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  let hr = Math.floor(m / 60);
  if (hr < 48) return `${hr}h`;
  return `${Math.floor(hr / 24)}d`;
}

// simplePath returns the field path of a printer column whose JSONPath is a
// plain chain of fields (.spec.size), which the page reads from the watched
// object itself; other columns (filters, dates) come from the server's Table.
// The server states the JSONPath in the column's description.
function simplePath(c) {
  const m = /\(in JSONPath format\): \.([A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*)$/.exec(c.description || '');
  if (!m || c.type === 'date') return null;
  return m[1].split('.');
}

function valueAt(obj, path) {
  let v = obj;
  for (const k of path) v = v && typeof v === 'object' ? v[k] : undefined;
  if (v === undefined || v === null) return '';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

// A RoleBinding or ClusterRoleBinding names a Role or a ClusterRole, and
// its subjects: the table shows both, as `kubectl get rolebindings -o
// wide` does, rather than the role's name alone.
const isBinding = (r) => r.group === 'rbac.authorization.k8s.io' && ['rolebindings', 'clusterrolebindings'].includes(r.resource);

function roleOf(obj) {
  const ref = obj.roleRef || {};
  return ref.kind && ref.name ? `${ref.kind}/${ref.name}` : ref.name || '';
}

function subjectsOf(obj) {
  return (obj.subjects || []).map((s) => (s.kind === 'ServiceAccount'
    ? `ServiceAccount ${s.namespace || obj.metadata.namespace || ''}/${s.name}` : `${s.kind} ${s.name}`)).join(', ');
}

// bindingColumns derives the Role column (kind/name, as the server's cell
// reads) from the object, so that a watched change redraws it, and adds
// Subjects, which the server's table has only among its wide columns, after
// the server's columns, so that the server's cells keep their places.
function bindingColumns(cols) {
  const out = cols.map((c) => (c.name === 'Role' ? { ...c, path: null, derive: roleOf } : c));
  if (!out.some((c) => c.name === 'Role')) out.push({ name: 'Role', derive: roleOf });
  out.push({ name: 'Subjects', derive: subjectsOf });
  return out;
}

function readyOf(obj) {
  const conds = (obj && obj.status && obj.status.conditions) || [];
  return conds.find((c) => c.type === 'Ready');
}

// pluginPill shows a Plugin's phase, coloured by its Ready (or Loaded)
// condition, with the condition's reason and message as the tooltip.
function pluginPill(p) {
  const st = (p && p.status) || {};
  const conds = st.conditions || [];
  const c = conds.find((x) => x.type === 'Ready') || conds.find((x) => x.type === 'Loaded');
  const text = st.phase || (c && c.status) || '—';
  return h('span', { class: `pill ${c ? c.status : 'none'}`, dataset: { phase: st.phase || '' },
    title: c ? [c.type, c.reason, c.message].filter(Boolean).join(': ') : '' }, text);
}

function readyPill(obj) {
  const c = readyOf(obj);
  if (!c) return h('span', { class: 'pill none' }, '—');
  return h('span', { class: `pill ${c.status}`, title: [c.reason, c.message].filter(Boolean).join(': ') }, c.status);
}

// ---- state ----

const state = {
  client: null,
  user: '', // the signed-in user's name, from SelfSubjectReview ('' when the server cannot say)
  resources: [], // discovered and watchable: {group, version, resource, kind, namespaced, verbs, scope}
  discovered: [], // every resource discovery lists, watchable or not
  watchers: new Set(), // active Watchers, for the connection indicator
  page: null, // the current page's cleanup function
  pluginsWatch: null,
  namespace: '', // the namespace the tables show ('' for all)
  labelSelector: '', // passed to the server with every list and watch
  nameFilter: '', // kept in the page: a substring of the name
  seenNamespaces: new Set(['default']),
};

function track(w) {
  state.watchers.add(w);
  updateConn();
  return w;
}

function untrack(w) {
  w.stop();
  state.watchers.delete(w);
  updateConn();
}

const RANK = { unauthorized: 5, error: 4, reconnecting: 3, connecting: 2, live: 1 };

function updateConn() {
  let worst = 'idle';
  for (const w of state.watchers) {
    if ((RANK[w.state] || 0) > (RANK[worst] || 0)) worst = w.state;
  }
  const labels = { idle: 'Idle', live: 'Live', connecting: 'Connecting…', reconnecting: 'Reconnecting…', error: 'Error', unauthorized: 'Unauthorized' };
  const el = $('conn');
  el.dataset.state = worst;
  el.querySelector('span').textContent = labels[worst] || worst;
}

function startWatch(resource, opts, handler) {
  const { onError, ...rest } = opts;
  const onState = (s, detail) => {
    updateConn();
    if (onError && (s === 'error' || s === 'unauthorized')) onError(detail);
  };
  return track(watch(resource, { client: state.client, ...rest, onState }, handler));
}

// ---- sign-in ----

// whoami asks the server who the token is (SelfSubjectReview, as `kubectl
// auth whoami` does): any bearer token the server accepts will do (the
// admin's, a ServiceAccount's, one from its token file, an OIDC ID token).
// It throws the APIError of a token the server refuses (401); a server that
// cannot answer gets '' and a GET of /api checks the token instead.
async function whoami(client) {
  try {
    const r = await client.create('/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
    return (r && r.status && r.status.userInfo && r.status.userInfo.username) || '';
  } catch (err) {
    if (err instanceof APIError && err.status === 401) throw err;
  }
  await client.get('/api');
  return '';
}

async function signIn(token, namespace) {
  const client = new Client({ token });
  const user = await whoami(client); // 401 for a bad token
  sessionStorage.setItem(TOKEN_KEY, token);
  if (namespace) sessionStorage.setItem(NAMESPACE_KEY, namespace); else sessionStorage.removeItem(NAMESPACE_KEY);
  state.client = client;
  state.user = user;
  state.namespace = namespace;
  access.clear();
}

function showUser() {
  $('whoami').textContent = state.user ? `Signed in as ${state.user}` : '';
  $('whoami').hidden = !state.user;
}

// refusal says in words what the server refused: err is an APIError of a
// request that would verb r's objects in namespace ns ('' for all of them).
function refusal(err, verb, r, ns) {
  if (!(err instanceof APIError)) return err && err.message ? err.message : String(err);
  if (err.status === 401) return 'The server no longer accepts your token: sign out and in again.';
  if (err.status !== 403) return err.message;
  const who = state.user ? `You (user ${state.user})` : 'You';
  const where = !r.namespaced ? '' : ns ? ` in namespace ${ns}` : ' in all namespaces';
  return `${who} may not ${verb} ${r.resource}${where}.`;
}

function showSignIn(message) {
  stopAll();
  state.client = null;
  state.user = '';
  showUser();
  $('app').hidden = true;
  $('signout').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  $('crumbs').textContent = '';
  $('signin-token').focus();
}

function stopAll() {
  if (state.page) state.page();
  state.page = null;
  if (state.pluginsWatch) untrack(state.pluginsWatch);
  state.pluginsWatch = null;
  for (const w of [...state.watchers]) untrack(w);
}

$('signin-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const token = $('signin-token').value.trim();
  const namespace = $('signin-namespace').value.trim();
  $('signin-error').textContent = '';
  try {
    await signIn(token, namespace);
    $('signin-token').value = '';
    await start();
  } catch (err) {
    $('signin-error').textContent = err instanceof APIError && err.status === 401
      ? 'That token was not accepted.' : `Sign-in failed: ${err.message}`;
  }
});

$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(NAMESPACE_KEY);
  access.clear();
  showSignIn('Signed out.');
});

// ---- access ----

// access caches the server's answers to "may I VERB this resource in this
// namespace" (or this object, given its name: SelfSubjectAccessReview, as
// `kubectl auth can-i` asks) for ACCESS_TTL, so that a role granted or
// taken away shows within a minute.
const ACCESS_TTL = 30000;
const access = new Map(); // key -> {at, answer: Promise<boolean>}

function canI(verb, r, ns, name = '') {
  const key = [verb, r.group, r.resource, ns, name].join('|');
  const hit = access.get(key);
  if (hit && Date.now() - hit.at < ACCESS_TTL) return hit.answer;
  const attrs = { verb, group: r.group, resource: r.resource, namespace: ns };
  if (name) attrs.name = name;
  const answer = state.client.create('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview',
    spec: { resourceAttributes: attrs },
  }).then((rev) => !!(rev && rev.status && rev.status.allowed), (err) => {
    // A server that cannot review: let the requests themselves say.
    console.warn('access review', verb, r.resource, err);
    access.delete(key);
    return true;
  });
  access.set(key, { at: Date.now(), answer });
  return answer;
}

// offer puts the buttons make() returns into slot, each only if the user
// holds every right it needs: the server decides (canI), the discovery
// verbs only say which actions the resource serves. Once every answer is
// in, slot gets data-access="checked", so that the absence of a button
// means something. The server still refuses what the user may not do.
function offer(slot, buttons) {
  Promise.all(buttons.map(async ({ verbs, r, ns, name = '', make }) => {
    if (!verbs.every((v) => r.verbs.includes(v))) return null;
    const answers = await Promise.all(verbs.map((v) => canI(v, r, ns, name)));
    return answers.every(Boolean) ? make() : null;
  })).then((made) => {
    slot.replaceChildren(...made.filter(Boolean));
    slot.dataset.access = 'checked';
  });
}

// mayWatch tells whether the user may list and watch r's objects in ns
// ('' for all namespaces, or a cluster-scoped resource).
async function mayWatch(r, ns) {
  const [list, watch] = await Promise.all([canI('list', r, ns), canI('watch', r, ns)]);
  return list && watch;
}

// visible keeps the resources the user may list and watch: everywhere, or
// (namespaced ones) in the namespace the page shows. Each gets scope: 'all'
// or 'namespace', which says where.
async function visible(resources) {
  const ns = state.namespace;
  const checked = await Promise.all(resources.map(async (r) => {
    if (await mayWatch(r, '')) return { ...r, scope: 'all' };
    if (r.namespaced && ns && await mayWatch(r, ns)) return { ...r, scope: 'namespace' };
    return null;
  }));
  return checked.filter(Boolean);
}

// ---- discovery ----

async function discover() {
  const c = state.client;
  const out = [];
  const add = (group, version, list) => {
    for (const r of list.resources || []) {
      if (r.name.includes('/') || !(r.verbs || []).includes('list')) continue;
      out.push({ group, version, resource: r.name, kind: r.kind, namespaced: r.namespaced, verbs: r.verbs || [] });
    }
  };
  const [core, groups] = await Promise.all([c.get('/api/v1'), c.get('/apis')]);
  add('', 'v1', core);
  await Promise.all((groups.groups || []).map(async (g) => {
    const v = (g.preferredVersion && g.preferredVersion.version) || (g.versions[0] && g.versions[0].version);
    try {
      add(g.name, v, await c.get(`/apis/${g.name}/${v}`));
    } catch (err) {
      console.warn('discovery', g.name, err);
    }
  }));
  out.sort((a, b) => a.kind.localeCompare(b.kind) || a.group.localeCompare(b.group));
  state.discovered = out;
  state.resources = await visible(out);
  return state.resources;
}

const routeOf = (r) => `#/k/${r.group || 'core'}/${r.version}/${r.resource}`;
const findResource = (group, version, resource) =>
  state.resources.find((r) => r.group === group && r.version === version && r.resource === resource);

function resourceForKind(apiVersion, kind) {
  const [g, v] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const same = state.resources.filter((r) => r.group === g && r.kind === kind);
  return same.find((r) => r.version === v) || same[0];
}

function objectRoute(r, obj) {
  const m = obj.metadata || {};
  return `${routeOf(r)}/${m.namespace || '_'}/${encodeURIComponent(m.name)}`;
}

function renderNav() {
  const ul = $('kinds');
  ul.replaceChildren(...state.resources.filter((r) => r.resource !== 'plugins').map((r) =>
    h('li', {}, h('a', { href: routeOf(r), dataset: { route: routeOf(r) } },
      h('span', {}, r.kind), h('span', { class: 'group' }, r.group || 'core')))));
  const plugins = state.resources.find((r) => r.resource === 'plugins');
  $('plugins-nav').hidden = !plugins;
  if (plugins) $('plugins-all').href = routeOf(plugins);
  if (plugins && !state.pluginsWatch) {
    const list = $('plugins');
    const draw = (_ev, w) => {
      list.replaceChildren(...w.items().map((p) =>
        h('li', {}, h('a', { class: 'row', href: objectRoute(plugins, p) }, h('span', {}, p.metadata.name), pluginPill(p)))));
      if (!w.items().length) list.replaceChildren(h('li', { class: 'muted' }, h('a', { href: routeOf(plugins) }, 'none yet')));
    };
    state.pluginsWatch = startWatch(resourcePath(plugins), {}, draw);
  }
}

function markActive() {
  const cur = location.hash.split('/').slice(0, 5).join('/');
  for (const a of document.querySelectorAll('#kinds a')) a.classList.toggle('active', a.dataset.route === cur);
}

// ---- pages ----

function crumbs(...parts) {
  $('crumbs').replaceChildren(...parts.flatMap((p, i) => [i ? ' / ' : '', p]));
}

function homePage(main) {
  crumbs();
  main.replaceChildren(
    h('h1', {}, 'Kinds'),
    h('p', { class: 'sub' }, `${state.resources.length} kinds you may watch. Pick one to watch its objects live.`),
    h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Kind'), h('th', {}, 'Group'), h('th', {}, 'Version'), h('th', {}, 'Resource'), h('th', {}, 'Scope'))),
      h('tbody', {}, state.resources.map((r) => h('tr', {},
        h('td', {}, h('a', { href: routeOf(r) }, r.kind)), h('td', {}, r.group || 'core'), h('td', {}, r.version),
        h('td', { class: 'mono' }, r.resource), h('td', {}, r.namespaced ? 'Namespaced' : 'Cluster'))))));
  return () => {};
}

// filterBar is the kind page's namespace selector and filters. The name
// filter is applied in the page as the user types; the namespace and the
// label selector go to the server (the list and watch are restarted), so the
// page holds only what it shows.
function filterBar(r, onName) {
  const nsSelect = h('select', { id: 'filter-namespace', title: 'Namespace', onchange: async () => {
    state.namespace = nsSelect.value;
    await refreshNav();
    route();
  } });
  function fillNamespaces(names) {
    const all = [...new Set([...names, ...state.seenNamespaces, state.namespace].filter(Boolean))].sort();
    nsSelect.replaceChildren(h('option', { value: '' }, 'All namespaces'),
      ...all.map((n) => h('option', { value: n }, n)));
    nsSelect.value = state.namespace;
  }
  if (r.namespaced) {
    fillNamespaces([]);
    if (findResource('', 'v1', 'namespaces')) {
      state.client.get('/api/v1/namespaces').then((l) => fillNamespaces((l.items || []).map((n) => n.metadata.name)),
        () => { /* not allowed to list namespaces: keep the ones seen */ });
    }
  }
  const name = h('input', { id: 'filter-name', type: 'search', placeholder: 'Filter by name', spellcheck: 'false',
    value: state.nameFilter, oninput: () => { state.nameFilter = name.value; onName(); } });
  const labels = h('input', { id: 'filter-labels', type: 'search', placeholder: 'Label selector: app=web,tier!=db', spellcheck: 'false',
    value: state.labelSelector, class: 'mono' });
  const form = h('form', { class: 'filters', id: 'filters', onsubmit: (e) => {
    e.preventDefault();
    if (labels.value.trim() !== state.labelSelector) { state.labelSelector = labels.value.trim(); route(); }
  } }, r.namespaced ? nsSelect : '', name, labels);
  labels.addEventListener('change', () => form.requestSubmit());
  return {
    el: form,
    matches: (obj) => !state.nameFilter || obj.metadata.name.toLowerCase().includes(state.nameFilter.toLowerCase()),
  };
}

// kindPage shows a live table: the server's Table columns (the CRD's printer
// columns), refreshed per object as watch events arrive, plus Ready and Age
// from the watched objects.
function kindPage(main, r) {
  crumbs(h('a', { href: routeOf(r) }, r.kind));
  if (state.filterRoute !== routeOf(r)) {
    state.filterRoute = routeOf(r);
    state.nameFilter = '';
    state.labelSelector = '';
  }
  const ns = r.namespaced ? state.namespace : '';
  const labels = state.labelSelector;
  const path = resourcePath(r, ns);
  const tbody = h('tbody');
  const thead = h('thead');
  const count = h('span', { id: 'objects-count' }, '…');
  const table = h('table', { class: 'grid', id: 'objects', dataset: { resource: r.resource } }, thead, tbody);
  const empty = h('div', { class: 'empty', id: 'objects-empty', hidden: true }, `No ${r.resource} yet.`);
  const listError = h('p', { class: 'error', id: 'objects-error', role: 'alert' });
  const bar = filterBar(r, () => render());
  // A new object is applied (patch), which creates it (create too).
  const create = h('span', { id: 'create-slot' });
  offer(create, [{ verbs: ['patch', 'create'], r, ns: r.namespaced ? ns || 'default' : '', make: () => h('button', { id: 'object-create', class: 'btn', onclick: () => {
    openEditor(main, { client: state.client, r, namespace: ns || 'default', text: newObjectYAML(r, ns || 'default'),
      title: `New ${r.kind}`, onApplied: (obj) => { location.hash = objectRoute(r, obj); } });
  } }, 'Create') }]);
  main.replaceChildren(h('div', { class: 'titlebar' }, h('h1', {}, r.kind), create),
    h('p', { class: 'sub' }, h('span', { class: 'mono' }, `${r.resource}.${r.group || 'core'}/${r.version}`), ' · ', count, ' objects'),
    bar.el, listError, table, empty);

  let columns = null; // server columns (priority 0), without Age
  const cells = new Map(); // key -> server cells
  const rows = new Map(); // key -> tr
  let stopped = false;

  function header() {
    const names = [];
    if (r.namespaced) names.push('Namespace');
    for (const c of columns || [{ name: 'Name' }]) names.push(c.name);
    if (!(columns || []).some((c) => c.name === 'Ready')) names.push('Ready');
    names.push('Age');
    thead.replaceChildren(h('tr', {}, names.map((n) => h('th', {}, n))));
  }

  function rowFor(obj, flash) {
    const key = objectKey(obj);
    const server = cells.get(key);
    const tds = [];
    if (r.namespaced) tds.push(h('td', { dataset: { col: 'Namespace' } }, obj.metadata.namespace));
    (columns || [{ name: 'Name' }]).forEach((c, i) => {
      if (c.type === 'date' && c.datePath) {
        const ts = valueAt(obj, c.datePath);
        tds.push(h('td', { dataset: { col: c.name }, class: 'age', title: ts }, age(ts)));
        return;
      }
      let v = c.derive ? c.derive(obj) : c.path ? valueAt(obj, c.path) : server ? server[i] : '';
      if (c.name === 'Name') v = h('a', { href: objectRoute(r, obj) }, obj.metadata.name);
      else if (c.name === 'Ready' && ['True', 'False', 'Unknown'].includes(v)) v = h('span', { class: `pill ${v}` }, v);
      tds.push(h('td', { dataset: { col: c.name } }, v === undefined || v === null ? '' : typeof v === 'object' && !(v instanceof Node) ? JSON.stringify(v) : v));
    });
    if (!(columns || []).some((c) => c.name === 'Ready')) tds.push(h('td', { dataset: { col: 'Ready' } }, readyPill(obj)));
    tds.push(h('td', { dataset: { col: 'Age' }, class: 'age', title: obj.metadata.creationTimestamp || '' }, age(obj.metadata.creationTimestamp)));
    const tr = h('tr', { dataset: { key, rv: obj.metadata.resourceVersion }, class: flash ? 'flash' : '' }, tds);
    return tr;
  }

  function render() {
    const all = w.items();
    for (const o of all) if (o.metadata.namespace) state.seenNamespaces.add(o.metadata.namespace);
    const items = all.filter(bar.matches);
    count.textContent = items.length === all.length ? String(all.length) : `${items.length} of ${all.length}`;
    empty.textContent = all.length ? 'No object matches the filter.' : `No ${r.resource}${ns ? ` in ${ns}` : ''}${labels ? ` with labels ${labels}` : ''} yet.`;
    empty.hidden = items.length > 0;
    table.hidden = items.length === 0;
    const want = new Set(items.map(objectKey));
    for (const [k, tr] of rows) if (!want.has(k)) { tr.remove(); rows.delete(k); cells.delete(k); }
    let prev = null;
    for (const obj of items) {
      const k = objectKey(obj);
      let tr = rows.get(k);
      if (!tr || tr.dataset.rv !== obj.metadata.resourceVersion || tr.dataset.stale) {
        const fresh = rowFor(obj, !!tr);
        if (tr) tr.replaceWith(fresh); else tbody.insertBefore(fresh, prev ? prev.nextSibling : tbody.firstChild);
        tr = fresh;
        rows.set(k, tr);
      } else if ((prev ? prev.nextSibling : tbody.firstChild) !== tr) {
        tbody.insertBefore(tr, prev ? prev.nextSibling : tbody.firstChild);
      }
      prev = tr;
    }
  }

  // Server cells are fetched per changed object (the whole table past 20).
  const dirty = new Set();
  let timer = null;
  function schedule(key) {
    dirty.add(key);
    if (!timer) timer = setTimeout(refresh, 30);
  }
  async function refresh() {
    timer = null;
    const keys = [...dirty];
    dirty.clear();
    if (stopped || !columns) { render(); return; }
    if (!columns.some((c) => c.name !== 'Name' && !c.path && !c.datePath && !c.derive)) {
      // Every column is read from the watched objects: nothing to fetch.
      for (const k of keys) { const tr = rows.get(k); if (tr) tr.dataset.stale = '1'; }
      render();
      return;
    }
    try {
      if (keys.length > 20) {
        await loadTable();
      } else {
        await Promise.all(keys.map(async (k) => {
          const obj = w.get(...splitKey(k));
          if (!obj) return;
          const t = await state.client.get(`${resourcePath(r, obj.metadata.namespace)}/${encodeURIComponent(obj.metadata.name)}`, { accept: TABLE_ACCEPT });
          const row = t && t.rows && t.rows[0];
          if (row && w.get(...splitKey(k))) cells.set(k, pick(row.cells));
        }));
      }
    } catch (err) {
      if (!(err instanceof APIError && err.status === 404)) console.warn('table refresh', err);
    }
    for (const k of keys) { const tr = rows.get(k); if (tr) tr.dataset.stale = '1'; }
    if (!stopped) render();
  }
  const splitKey = (k) => (k.includes('/') ? k.split('/').reverse() : [k]);

  let keep = [];
  const pick = (all) => keep.map((i) => all[i]);
  async function loadTable() {
    const t = await state.client.get(path, { accept: TABLE_ACCEPT, query: { labelSelector: labels } });
    if (!t || t.kind !== 'Table') throw new Error('no Table output');
    keep = [];
    const cols = [];
    (t.columnDefinitions || []).forEach((c, i) => {
      if ((c.priority || 0) === 0 && c.name !== 'Age') { keep.push(i); cols.push({ ...c, path: simplePath(c), datePath: c.type === 'date' ? simplePath({ ...c, type: '' }) : null }); }
    });
    columns = isBinding(r) ? bindingColumns(cols) : cols;
    for (const row of t.rows || []) {
      const m = (row.object && row.object.metadata) || {};
      cells.set(m.namespace ? `${m.namespace}/${m.name}` : m.name, pick(row.cells));
    }
    header();
  }

  header();
  const w = startWatch(path, { labelSelector: labels, onError: (err) => {
    if (!err) { listError.textContent = ''; return; }
    listError.textContent = err instanceof APIError && (err.status === 401 || err.status === 403)
      ? refusal(err, 'list', r, ns) : `The server refused the list: ${err.message || err}`;
    listError.title = err.message || '';
  } }, (ev) => {
    if (ev.type === 'SYNCED') { listError.textContent = ''; render(); return; }
    if (ev.type === 'DELETED') { render(); return; }
    schedule(objectKey(ev.object));
  });
  loadTable().then(() => { for (const k of rows.keys()) rows.get(k).dataset.stale = '1'; render(); })
    .catch((err) => { console.warn('table', err); columns = null; header(); render(); });
  const ticker = setInterval(() => tick(tbody), 1000);
  return () => { stopped = true; clearInterval(ticker); clearTimeout(timer); untrack(w); };
}

// objectPage shows one object live: its YAML, owner, children and events.
function objectPage(main, r, namespace, name) {
  const isPlugin = r.group === 'setpoint.dev' && r.resource === 'plugins';
  const counts = h('div', { class: 'counts-box' }); // a Plugin's counts, shown with its log
  const path = resourcePath(r, namespace);
  crumbs(h('a', { href: routeOf(r) }, r.kind), name);
  const yaml = h('pre', { class: 'yaml mono', id: 'object-yaml' });
  const summary = h('div', { id: 'object-summary' });
  const owners = h('div', { id: 'object-owners' }, h('span', { class: 'muted' }, 'None'));
  const children = h('div', { id: 'object-children' }, h('span', { class: 'muted' }, 'Looking…'));
  const events = h('div', { id: 'object-events' }, h('span', { class: 'muted' }, 'None'));
  const copyState = h('span', { id: 'object-copy-state', class: 'muted', role: 'status' });
  const edit = h('span', { id: 'edit-slot' });
  offer(edit, [{ verbs: ['patch'], r, ns: namespace, name, make: () => h('button', { id: 'object-edit', class: 'btn', onclick: () => {
    if (!current) return;
    openEditor(main, { client: state.client, r, namespace, text: editableYAML(current), title: `Edit ${r.kind} ${name}` });
  } }, 'Edit') }]);
  const del = h('span', { id: 'delete-slot' });
  offer(del, [{ verbs: ['delete'], r, ns: namespace, name, make: () => deleteButton(r, namespace, name) }]);
  const actions = h('div', { class: 'actions', id: 'object-actions' },
    edit,
    h('button', { id: 'object-copy', class: 'btn', onclick: async () => {
      copyState.textContent = await copyText(yaml.textContent) ? 'Copied.' : 'Selected: press Ctrl+C to copy.';
      if (copyState.textContent.startsWith('Selected')) selectText(yaml);
    } }, 'Copy YAML'),
    del, copyState);
  main.replaceChildren(
    h('div', { class: 'titlebar' }, h('h1', {}, name), actions), h('p', { class: 'sub' }, `${r.kind}${namespace ? ` in ${namespace}` : ''}`),
    h('div', { class: 'detail' },
      h('div', {}, h('div', { class: 'card' }, h('h2', {}, 'Object'), yaml)),
      h('div', {},
        h('div', { class: 'card' }, h('h2', {}, 'Status'), summary),
        h('div', { class: 'card' }, h('h2', {}, 'Owner'), owners),
        h('div', { class: 'card' }, h('h2', {}, 'Children'), children, childLegend()),
        h('div', { class: 'card' }, h('h2', {}, 'Events'), events))));

  let current = null;
  let childTimer = null;
  const w = startWatch(resourcePath(r, namespace), { fieldSelector: `metadata.name=${name}`, onError: (err) => {
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) yaml.textContent = refusal(err, 'watch', r, namespace);
  } }, () => {
    const obj = w.get(name, namespace);
    if (obj === current) return;
    current = obj;
    if (!obj) { yaml.textContent = 'Not found (deleted?).'; summary.replaceChildren(); return; }
    yaml.textContent = toYAML(obj);
    const c = readyOf(obj);
    summary.replaceChildren(h('div', {}, 'Ready: ', readyPill(obj)),
      c && c.message ? h('p', { class: 'muted' }, c.message) : '',
      h('div', { class: 'muted' }, 'Age ', h('span', { class: 'age', title: obj.metadata.creationTimestamp || '' }, age(obj.metadata.creationTimestamp)),
        ` · resourceVersion ${obj.metadata.resourceVersion}`));
    if (isPlugin) counts.replaceChildren(pluginCounts(obj));
    const refs = obj.metadata.ownerReferences || [];
    owners.replaceChildren(refs.length ? h('ul', {}, refs.map((o) => {
      const or = resourceForKind(o.apiVersion, o.kind);
      const label = `${o.kind}/${o.name}${o.controller ? ' (controller)' : ''}`;
      return h('li', {}, or ? h('a', { href: objectRoute(or, { metadata: { namespace: or.namespaced ? namespace : '', name: o.name } }) }, label) : label);
    })) : h('span', { class: 'muted' }, 'None'));
    clearTimeout(childTimer);
    childTimer = setTimeout(() => findChildren(obj), 200);
  });

  async function findChildren(obj) {
    const uid = obj.metadata.uid;
    const found = [];
    const candidates = state.resources.filter((x) => x.verbs.includes('list') && x.resource !== 'events').slice(0, 40);
    await Promise.all(candidates.map(async (x) => {
      try {
        const list = await state.client.get(resourcePath(x, x.namespaced ? namespace : ''));
        for (const it of list.items || []) {
          if ((it.metadata.ownerReferences || []).some((o) => o.uid === uid)) found.push({ r: x, obj: it });
        }
      } catch { /* not listable here */ }
    }));
    found.sort((a, b) => (a.r.kind + a.obj.metadata.name).localeCompare(b.r.kind + b.obj.metadata.name));
    children.replaceChildren(found.length ? h('ul', {}, found.map(({ r: x, obj: it }) =>
      h('li', {}, h('a', { href: objectRoute(x, it) }, `${x.kind}/${it.metadata.name}`), ' ', readyPill(it))))
      : h('span', { class: 'muted' }, 'None'));
  }

  let ew = null;
  const eventsRes = findResource('', 'v1', 'events');
  if (eventsRes && (namespace || !r.namespaced)) {
    ew = startWatch(resourcePath(eventsRes, namespace), {}, (_ev, ww) => {
      const mine = ww.items().filter((e) => e.involvedObject && e.involvedObject.name === name &&
        e.involvedObject.kind === r.kind && (!current || !e.involvedObject.uid || e.involvedObject.uid === current.metadata.uid));
      mine.sort((a, b) => String(b.lastTimestamp || b.eventTime || '').localeCompare(String(a.lastTimestamp || a.eventTime || '')));
      events.replaceChildren(mine.length ? h('table', { class: 'events' }, h('tbody', {}, mine.slice(0, 50).map((e) => h('tr', {},
        h('td', {}, h('span', { class: `pill ${e.type === 'Warning' ? 'False' : 'True'}` }, e.reason || e.type || '')),
        h('td', { class: 'msg' }, e.message || '', e.count > 1 ? h('span', { class: 'muted' }, ` ×${e.count}`) : ''),
        h('td', { class: 'muted age', title: e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp || '' },
          age(e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp))))))
        : h('span', { class: 'muted' }, 'None'));
    });
  }
  const stopLog = isPlugin ? pluginLogCard(main, name, counts) : () => {};
  const ticker = setInterval(() => tick(main), 1000);
  return () => { clearTimeout(childTimer); clearInterval(ticker); untrack(w); if (ew) untrack(ew); stopLog(); };
}

// tick refreshes the relative times under el: each .age element holds its
// timestamp in its title.
function tick(el) {
  for (const x of el.querySelectorAll('.age')) if (x.title) x.textContent = age(x.title);
}

// childLegend says what the badge next to each child means.
function childLegend() {
  return h('p', { class: 'legend muted', id: 'children-legend' }, 'Badge: the child\'s Ready condition. ',
    h('span', { class: 'pill True' }, 'True'), ' ready · ', h('span', { class: 'pill False' }, 'False'), ' not ready · ',
    h('span', { class: 'pill Unknown' }, 'Unknown'), ' not known yet · ', h('span', { class: 'pill none' }, '—'), ' no Ready condition');
}

// pluginCounts shows the calls and failed calls the server counted for a
// Plugin (since it started), and the last failure.
function pluginCounts(p) {
  const st = p.status || {};
  return h('div', { id: 'plugin-counts', class: 'counts', title: 'Counted by this server since it started' },
    h('span', {}, 'Calls ', h('b', { id: 'plugin-calls' }, String(st.calls || 0))),
    h('span', {}, 'Errors ', h('b', { id: 'plugin-errors', class: st.errors ? 'bad' : '' }, String(st.errors || 0))),
    st.lastError ? h('p', { class: 'muted', id: 'plugin-last-error' }, `Last error: ${st.lastError}`) : '');
}

// copyText puts text on the clipboard; false when the page may not (no
// clipboard API outside a secure context, or permission refused), and the
// caller selects the text instead. The execCommand fallback covers browsers
// that refuse the API but allow a copy from a user gesture.
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch { /* fall back */ }
  const ta = h('textarea', { class: 'offscreen', readonly: true });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  ta.remove();
  return ok;
}

function selectText(el) {
  const range = document.createRange();
  range.selectNodeContents(el);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

// deleteButton deletes the object after an inline confirmation that names it.
function deleteButton(r, namespace, name) {
  const err = h('span', { class: 'error', id: 'delete-error', role: 'alert' });
  const confirmBox = h('span', { class: 'confirm', id: 'delete-confirm', hidden: true },
    `Delete ${r.kind} ${namespace ? `${namespace}/` : ''}${name}? `,
    h('button', { id: 'delete-yes', class: 'btn danger', onclick: async () => {
      err.textContent = '';
      try {
        await state.client.delete(`${resourcePath(r, namespace)}/${encodeURIComponent(name)}`);
        confirmBox.hidden = true;
        location.hash = routeOf(r);
      } catch (e) {
        err.textContent = `Delete failed: ${e instanceof APIError && e.status === 403 ? refusal(e, 'delete', r, namespace) : e.message}`;
      }
    } }, 'Delete'),
    h('button', { id: 'delete-no', class: 'btn', onclick: () => { confirmBox.hidden = true; } }, 'Cancel'));
  return h('span', {}, h('button', { id: 'object-delete', class: 'btn danger', onclick: () => { confirmBox.hidden = false; } }, 'Delete…'), confirmBox, err);
}

// LOG_KEEP bounds the log lines the page holds.
const LOG_KEEP = 500;

// pluginLogCard adds a Plugin's live log to its page: the last lines, then
// new ones as they come, optionally about one object only.
function pluginLogCard(main, name, counts) {
  const pre = h('pre', { class: 'log mono', id: 'plugin-log' });
  const status = h('span', { class: 'muted', id: 'plugin-log-state' }, 'Connecting…');
  const filter = h('input', { id: 'plugin-log-object', type: 'search', placeholder: 'Kind/name or Kind/namespace/name', spellcheck: 'false' });
  main.append(h('div', { class: 'card' }, h('h2', {}, 'Log ', status), counts,
    h('form', { class: 'log-filter', onsubmit: (e) => { e.preventDefault(); restart(); } }, filter), pre));
  let f = null;
  function restart() {
    if (f) f.stop();
    pre.textContent = '';
    const object = filter.value.trim();
    f = followLog(state.client, name, {
      object,
      onState: (s) => { status.textContent = s === 'live' ? '' : s; status.dataset.state = s; },
      onLines: (lines) => {
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.append(...lines.map((l) => h('div', { class: /^\S+ (WARN|ERROR)/.test(l) ? 'warn' : '' }, l)));
        while (pre.childElementCount > LOG_KEEP) pre.firstElementChild.remove();
        if (atEnd) pre.scrollTop = pre.scrollHeight;
      },
    });
  }
  restart();
  return () => { if (f) f.stop(); };
}

// ---- router ----

async function route() {
  if (!state.client) return;
  if (state.page) state.page();
  state.page = null;
  const main = $('main');
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  markActive();
  if (parts[0] === 'k' && parts.length >= 4) {
    const r = findResource(parts[1] === 'core' ? '' : parts[1], parts[2], parts[3]);
    if (!r) {
      const known = state.discovered.find((x) => x.group === (parts[1] === 'core' ? '' : parts[1]) && x.version === parts[2] && x.resource === parts[3]);
      if (known) {
        const who = state.user ? `You (user ${state.user})` : 'You';
        const where = !known.namespaced ? '' : state.namespace ? ` in namespace ${state.namespace}` : ' in all namespaces';
        main.replaceChildren(h('h1', {}, known.kind), h('p', { class: 'error', id: 'objects-error', role: 'alert' },
          `${who} may not list and watch ${known.resource}${where}.`), known.namespaced ? filterBar(known, () => {}).el : '');
        return;
      }
      main.replaceChildren(h('h1', {}, 'Not served'), h('p', { class: 'sub' }, `${parts[3]} is not served by this server.`));
      return;
    }
    if (parts.length >= 6) {
      state.page = objectPage(main, r, parts[4] === '_' ? '' : parts[4], parts[5]);
    } else {
      state.page = kindPage(main, r);
    }
    return;
  }
  state.page = homePage(main);
}

async function start() {
  $('signin').hidden = true;
  $('app').hidden = false;
  $('signout').hidden = false;
  showUser();
  try {
    await discover();
  } catch (err) {
    if (err instanceof APIError && err.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showSignIn('Your token is no longer accepted.');
      return;
    }
    $('main').replaceChildren(h('p', { class: 'error' }, `Discovery failed: ${err.message}`));
    return;
  }
  renderNav();
  await route();
}

window.addEventListener('hashchange', route);

// refreshNav discovers again and redraws the navigation if what the user
// may watch changed.
async function refreshNav() {
  const before = state.resources.map((r) => routeOf(r) + r.scope).join();
  try { await discover(); } catch { return; }
  if (state.resources.map((r) => routeOf(r) + r.scope).join() !== before) { renderNav(); markActive(); }
}

// Discovery changes as kinds are registered, and access as roles are
// granted; refresh the navigation now and then without disturbing the page.
setInterval(() => {
  if (!state.client || document.hidden) return;
  refreshNav();
}, 10000);

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) {
  state.client = new Client({ token: saved });
  state.namespace = sessionStorage.getItem(NAMESPACE_KEY) || '';
  whoami(state.client).then((u) => { state.user = u; showUser(); }, () => {});
  start();
} else {
  showSignIn();
}
