// setpoint.js: Setpoint's browser client, a plain ES module (no build step).
//
//   import { Client, watch } from '/ui/setpoint.js';
//   const client = new Client({ token });
//   const w = watch('/apis/example.setpoint.dev/v1/widgets', { client, namespace: 'default' },
//     (ev) => console.log(ev.type, ev.object?.metadata.name));
//   await w.synced;  w.items();  w.stop();
//
// watch() is what an informer does: it lists, then watches over WebSocket from
// the list's resourceVersion, keeps a local cache consistent with the server,
// reconnects with backoff and resumes from the last resourceVersion it saw
// (events and bookmarks), and lists again when the server answers 410 (the
// resourceVersion is gone). The handler sees ADDED, MODIFIED and DELETED as
// the cache changes (a relist reports the difference, so nothing is seen
// twice), and SYNCED after every list.
//
// The bearer token travels as the WebSocket subprotocol
// base64url.bearer.authorization.k8s.io.<token>, next to setpoint.watch.v1,
// because a browser cannot set headers on a WebSocket. Close codes from the
// server: 1000 the watch ended, 1001 the server is going away, 4008 this
// client was too slow; all three mean "resume from the last resourceVersion".

const TOKEN_PROTOCOL = 'base64url.bearer.authorization.k8s.io.';
export const WATCH_PROTOCOL = 'setpoint.watch.v1';
export const CLOSE_TOO_SLOW = 4008;

/** An API error: status is the HTTP code, body the meta/v1 Status if any. */
export class APIError extends Error {
  constructor(status, body, fallback) {
    super((body && body.message) || fallback || `HTTP ${status}`);
    this.name = 'APIError';
    this.status = status;
    this.reason = body && body.reason;
    this.body = body;
  }
}

function base64url(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Client makes authenticated REST calls to one Setpoint server. */
export class Client {
  constructor({ token = '', base = globalThis.location ? location.origin : '' } = {}) {
    this.token = token;
    this.base = base.replace(/\/$/, '');
  }

  url(path, query) {
    const u = new URL(this.base + path);
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
    }
    return u;
  }

  /** request returns the decoded JSON body, or throws an APIError. */
  async request(method, path, { query, body, accept = 'application/json', contentType = 'application/json', signal } = {}) {
    const headers = { Accept: accept };
    if (this.token) headers.Authorization = 'Bearer ' + this.token;
    const init = { method, headers, signal, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = contentType;
      init.body = typeof body === 'string' ? body : JSON.stringify(body);
    }
    const resp = await fetch(this.url(path, query), init);
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!resp.ok) throw new APIError(resp.status, data, text.slice(0, 200));
    return data;
  }

  get(path, opts) { return this.request('GET', path, opts); }
  create(path, obj) { return this.request('POST', path, { body: obj }); }
  update(path, obj) { return this.request('PUT', path, { body: obj }); }
  patch(path, patch, type = 'merge') {
    return this.request('PATCH', path, { body: patch, contentType: `application/${type}-patch+json` });
  }
  delete(path) { return this.request('DELETE', path); }

  /** webSocket opens a watch socket on path with the token as a subprotocol. */
  webSocket(path, query) {
    const u = this.url(path, query);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    const protocols = [WATCH_PROTOCOL];
    if (this.token) protocols.unshift(TOKEN_PROTOCOL + base64url(this.token));
    return new WebSocket(u, protocols);
  }
}

/**
 * resourcePath returns the list path of a resource in a namespace ('' for all
 * namespaces or a cluster-scoped resource). resource is a path such as
 * '/apis/example.setpoint.dev/v1/widgets' or '/api/v1/events', or an object
 * {group, version, resource}.
 */
export function resourcePath(resource, namespace = '') {
  let prefix, plural;
  if (typeof resource === 'string') {
    const parts = resource.replace(/^\/+|\/+$/g, '').split('/');
    plural = parts.pop();
    prefix = '/' + parts.join('/');
  } else {
    prefix = resource.group ? `/apis/${resource.group}/${resource.version}` : `/api/${resource.version || 'v1'}`;
    plural = resource.resource;
  }
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${prefix}${ns}/${plural}`;
}

/** objectKey is namespace/name, or name for a cluster-scoped object. */
export function objectKey(obj) {
  const m = obj.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

// newer tells whether resourceVersion a comes after b. Setpoint's are
// decimal revisions; anything else is only compared for equality.
function newer(a, b) {
  if (!b) return true;
  if (!a) return false;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a !== b;
}

const rvOf = (obj) => (obj && obj.metadata && obj.metadata.resourceVersion) || '';

/**
 * watch starts an informer on resource (see resourcePath). options:
 *   client        a Client (or token and base to make one)
 *   namespace     '' for all namespaces
 *   labelSelector, fieldSelector
 *   onState(state, detail)  'connecting', 'live', 'reconnecting',
 *                 'unauthorized', 'error', 'stopped'
 *   backoff       {initial: 250, max: 10000} in ms
 * handler({type, object, oldObject}, watcher) gets ADDED, MODIFIED, DELETED
 * and SYNCED.
 */
export function watch(resource, options = {}, handler = () => {}) {
  return new Watcher(resource, options, handler);
}

export class Watcher {
  #client; #path; #opts; #handler;
  #cache = new Map();
  #rv = '';
  #state = 'connecting';
  #stopped = false;
  #needList = true;
  #ws = null;
  #abort = null;
  #wake = null;
  #syncedResolve;

  constructor(resource, options, handler) {
    this.#client = options.client || new Client({ token: options.token, base: options.base });
    this.#path = resourcePath(resource, options.namespace || '');
    this.#opts = {
      labelSelector: options.labelSelector || '',
      fieldSelector: options.fieldSelector || '',
      onState: options.onState || (() => {}),
      initial: (options.backoff && options.backoff.initial) || 250,
      max: (options.backoff && options.backoff.max) || 10000,
    };
    this.#handler = handler;
    /** synced resolves after the first list. */
    this.synced = new Promise((resolve) => { this.#syncedResolve = resolve; });
    /** stats counts what happened, for tests and the UI. */
    this.stats = { lists: 0, connects: 0, events: 0, bookmarks: 0, relists410: 0 };
    this.#run();
  }

  /** items returns the cached objects, sorted by namespace and name. */
  items() {
    return [...this.#cache.values()].sort((a, b) => objectKey(a).localeCompare(objectKey(b)));
  }

  /** get returns the cached object, or undefined. */
  get(name, namespace = '') {
    return this.#cache.get(namespace ? `${namespace}/${name}` : name);
  }

  get resourceVersion() { return this.#rv; }
  get state() { return this.#state; }
  get path() { return this.#path; }

  /** stop ends the watch; the cache stays readable. */
  stop() {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#abort) this.#abort.abort();
    if (this.#ws) this.#ws.close(1000, 'stopped');
    if (this.#wake) this.#wake();
    this.#setState('stopped');
  }

  #setState(state, detail) {
    if (this.#state === 'stopped') return;
    this.#state = state;
    try { this.#opts.onState(state, detail); } catch (e) { console.error(e); }
  }

  #emit(type, object, oldObject) {
    try { this.#handler({ type, object, oldObject }, this); } catch (e) { console.error(e); }
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#wake = () => { clearTimeout(t); resolve(); };
    });
  }

  #backoff(failures) {
    const d = Math.min(this.#opts.max, this.#opts.initial * 2 ** Math.max(0, failures - 1));
    return d * (0.8 + Math.random() * 0.4);
  }

  async #run() {
    let failures = 0;
    while (!this.#stopped) {
      if (this.#needList) {
        try {
          await this.#list();
        } catch (e) {
          if (this.#stopped) break;
          failures++;
          const auth = e && (e.status === 401 || e.status === 403);
          // A network failure (no HTTP answer) is a server that is away.
          this.#setState(auth ? 'unauthorized' : e instanceof APIError ? 'error' : 'reconnecting', e);
          await this.#sleep(this.#backoff(auth ? failures + 3 : failures));
          continue;
        }
      }
      if (this.#stopped) break;
      const r = await this.#stream();
      if (this.#stopped) break;
      if (r.relist) {
        this.#needList = true;
        failures = r.gone ? 0 : failures + 1;
        if (r.gone) continue;
      } else if (!r.opened) {
        failures++;
        // A handshake that fails says nothing about why; a list does (401, 404, ...).
        if (failures >= 2) this.#needList = true;
      } else if (r.code === 1000 || r.code === CLOSE_TOO_SLOW) {
        failures = 0;
        continue; // resume at once
      } else {
        failures = r.lived > 10000 ? 1 : failures + 1;
      }
      this.#setState('reconnecting', r);
      await this.#sleep(this.#backoff(failures));
    }
  }

  async #list() {
    this.#setState(this.#state === 'live' ? 'reconnecting' : this.#state, null);
    this.#abort = new AbortController();
    const query = { labelSelector: this.#opts.labelSelector, fieldSelector: this.#opts.fieldSelector, limit: 500 };
    const items = [];
    let rv = '';
    for (let page = 0; ; page++) {
      const list = await this.#client.get(this.#path, { query, signal: this.#abort.signal });
      if (page === 0) rv = (list.metadata && list.metadata.resourceVersion) || '';
      for (const it of list.items || []) items.push(it);
      const cont = list.metadata && list.metadata.continue;
      if (!cont) break;
      query.continue = cont;
    }
    this.#abort = null;
    this.stats.lists++;
    // Report the difference between the cache and the list.
    const seen = new Set();
    for (const obj of items) {
      fillTypeMeta(obj, this.#path);
      const k = objectKey(obj);
      seen.add(k);
      const old = this.#cache.get(k);
      this.#cache.set(k, obj);
      if (!old) this.#emit('ADDED', obj);
      else if (rvOf(old) !== rvOf(obj)) this.#emit('MODIFIED', obj, old);
    }
    for (const [k, old] of [...this.#cache]) {
      if (!seen.has(k)) {
        this.#cache.delete(k);
        this.#emit('DELETED', old, old);
      }
    }
    this.#rv = rv;
    this.#needList = false;
    this.#syncedResolve();
    this.#emit('SYNCED');
  }

  #stream() {
    return new Promise((resolve) => {
      const query = {
        watch: 'true',
        allowWatchBookmarks: 'true',
        resourceVersion: this.#rv,
        labelSelector: this.#opts.labelSelector,
        fieldSelector: this.#opts.fieldSelector,
      };
      let ws;
      try {
        ws = this.#client.webSocket(this.#path, query);
      } catch (e) {
        resolve({ opened: false, error: e });
        return;
      }
      this.#ws = ws;
      this.stats.connects++;
      let opened = false, relist = false, gone = false, openedAt = 0;
      ws.onopen = () => {
        opened = true;
        openedAt = Date.now();
        this.#setState('live');
      };
      ws.onmessage = (m) => {
        let ev;
        try { ev = JSON.parse(m.data); } catch { return; }
        const r = this.#apply(ev);
        if (r) {
          relist = true;
          gone = r === 'gone';
          ws.close(1000, 'relist');
        }
      };
      ws.onclose = (e) => {
        this.#ws = null;
        resolve({ opened, relist, gone, code: e.code, reason: e.reason, lived: opened ? Date.now() - openedAt : 0 });
      };
    });
  }

  // apply folds one watch event into the cache; it returns 'gone' or 'error'
  // when the watch must be replaced by a list.
  #apply(ev) {
    const obj = ev.object;
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED': {
        this.stats.events++;
        const k = objectKey(obj);
        const old = this.#cache.get(k);
        if (newer(rvOf(obj), this.#rv)) this.#rv = rvOf(obj);
        if (old && !newer(rvOf(obj), rvOf(old))) return null; // already seen
        this.#cache.set(k, obj);
        this.#emit(old ? 'MODIFIED' : 'ADDED', obj, old);
        return null;
      }
      case 'DELETED': {
        this.stats.events++;
        const k = objectKey(obj);
        const old = this.#cache.get(k);
        if (newer(rvOf(obj), this.#rv)) this.#rv = rvOf(obj);
        if (!old || newer(rvOf(old), rvOf(obj))) return null;
        this.#cache.delete(k);
        this.#emit('DELETED', obj, old);
        return null;
      }
      case 'BOOKMARK':
        this.stats.bookmarks++;
        if (newer(rvOf(obj), this.#rv)) this.#rv = rvOf(obj);
        return null;
      case 'ERROR':
        if (obj && obj.code === 410) {
          this.stats.relists410++;
          return 'gone';
        }
        this.#setState('error', obj);
        return 'error';
      default:
        return null;
    }
  }
}

// List items carry no apiVersion and kind; give them the list's.
function fillTypeMeta(obj, path) {
  if (obj.apiVersion) return;
  const m = path.match(/^\/apis\/([^/]+)\/([^/]+)\//) || path.match(/^\/api\/([^/]+)\//);
  if (m) obj.apiVersion = m.length === 3 ? `${m[1]}/${m[2]}` : m[1];
}
