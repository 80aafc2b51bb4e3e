// editor.js: create and edit an object from YAML. The text goes to the
// server as a server-side apply patch (application/apply-patch+yaml,
// fieldManager=setpoint-ui), so the page needs no YAML parser: it reads only
// the name and namespace to build the URL. Review sends the same patch with
// dryRun=All and shows the difference between the stored object and the
// result; Apply is enabled once the current text has been reviewed.
import { APIError, resourcePath } from './setpoint.js';
import { toYAML } from './yaml.js';
import { h } from './dom.js';
import { lineDiff } from './diff.js';

export const FIELD_MANAGER = 'setpoint-ui';

// Fields the server owns; they are left out of the text to edit and of the
// diff.
function editable(obj) {
  const o = structuredClone(obj);
  const m = o.metadata || {};
  for (const k of ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'managedFields', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds']) delete m[k];
  if (m.annotations) delete m.annotations['kubectl.kubernetes.io/last-applied-configuration'];
  delete o.status;
  return o;
}

/** editableYAML is obj as YAML without the fields the server owns. */
export function editableYAML(obj) { return toYAML(editable(obj)); }

/** newObjectYAML is a starting text for a new object of resource r. */
export function newObjectYAML(r, namespace) {
  const meta = { name: '' };
  if (r.namespaced) meta.namespace = namespace;
  return toYAML({ apiVersion: r.group ? `${r.group}/${r.version}` : r.version, kind: r.kind, metadata: meta, spec: {} });
}

// nameOf reads metadata.name and metadata.namespace from the text: JSON, or
// block YAML where they are plain scalars under a top-level metadata key.
export function nameOf(text) {
  const t = text.trim();
  if (t.startsWith('{')) {
    try {
      const m = JSON.parse(t).metadata || {};
      return { name: m.name || '', namespace: m.namespace || '' };
    } catch { return { name: '', namespace: '' }; }
  }
  const out = { name: '', namespace: '' };
  let inMeta = false;
  let indent = -1;
  for (const line of text.split('\n')) {
    if (/^\s*(#.*)?$/.test(line)) continue;
    if (/^---/.test(line)) break;
    const lead = line.length - line.trimStart().length;
    if (lead === 0) { inMeta = /^metadata:\s*(#.*)?$/.test(line); indent = -1; continue; }
    if (!inMeta) continue;
    if (indent < 0) indent = lead;
    if (lead !== indent) continue;
    const m = /^\s*(name|namespace):\s*(.*?)\s*(#.*)?$/.exec(line);
    if (m) out[m[1]] = m[2].replace(/^(["'])(.*)\1$/, '$2');
  }
  return out;
}

/** statusError renders an APIError's Status: its message and causes. */
export function statusError(err) {
  const body = (err && err.body) || {};
  const causes = (body.details && body.details.causes) || [];
  return [h('div', { class: 'status-message' }, err.message || String(err)),
    causes.length ? h('ul', { class: 'causes' }, causes.map((c) =>
      h('li', {}, c.field ? h('code', {}, c.field) : '', c.field ? ': ' : '', c.message || c.reason || ''))) : ''];
}

/**
 * openEditor shows an editor card at the top of main: r is the resource,
 * namespace the default one for the object, text the YAML to start with.
 * onApplied(obj) runs after a successful apply.
 */
export function openEditor(main, { client, r, namespace, text, title = `${r.kind}: apply YAML`, onApplied = () => {} }) {
  const old = document.getElementById('editor');
  if (old) old.remove();
  const area = h('textarea', { id: 'edit-yaml', class: 'mono', spellcheck: 'false', rows: Math.min(30, Math.max(10, text.split('\n').length + 2)) });
  area.value = text;
  const error = h('div', { id: 'edit-error', class: 'error', role: 'alert' });
  const diff = h('pre', { id: 'edit-diff', class: 'diff mono', hidden: true });
  const note = h('span', { id: 'edit-state', class: 'muted' });
  const force = h('input', { id: 'edit-force', type: 'checkbox' });
  const review = h('button', { id: 'edit-review', type: 'button', class: 'btn' }, 'Review changes');
  const apply = h('button', { id: 'edit-apply', type: 'button', class: 'btn primary', disabled: true }, 'Apply');
  const cancel = h('button', { id: 'edit-cancel', type: 'button', class: 'btn' }, 'Cancel');
  const card = h('div', { class: 'card editor', id: 'editor' }, h('h2', {}, title), area,
    h('div', { class: 'actions' }, review, apply, cancel,
      h('label', { title: 'Take over fields another manager set (server-side apply force)' }, force, ' Force conflicts'), note),
    error, diff);
  main.prepend(card);
  area.focus();

  let reviewed = null; // the text the diff was made from
  const invalidate = () => { reviewed = null; apply.disabled = true; };
  area.addEventListener('input', invalidate);
  force.addEventListener('change', invalidate);
  cancel.addEventListener('click', () => card.remove());

  function target() {
    const id = nameOf(area.value);
    if (!id.name) throw new Error('metadata.name is required.');
    const ns = r.namespaced ? (id.namespace || namespace || 'default') : '';
    return `${resourcePath(r, ns)}/${encodeURIComponent(id.name)}`;
  }

  async function send(path, dryRun) {
    const query = { fieldManager: FIELD_MANAGER, fieldValidation: 'Strict' };
    if (dryRun) query.dryRun = 'All';
    if (force.checked) query.force = 'true';
    return client.request('PATCH', path, { query, body: area.value, contentType: 'application/apply-patch+yaml' });
  }

  function fail(err) {
    error.replaceChildren(...(err instanceof APIError ? statusError(err) : [h('div', { class: 'status-message' }, err.message || String(err))]));
    if (err instanceof APIError && err.status === 409 && err.reason === 'Conflict') {
      error.append(h('p', { class: 'muted' }, 'Another field manager owns these fields. Tick "Force conflicts" to take them over.'));
    }
  }

  review.addEventListener('click', async () => {
    const text = area.value;
    error.replaceChildren();
    diff.hidden = true;
    note.textContent = 'Checking…';
    try {
      const path = target();
      let before = '';
      try {
        before = editableYAML(await client.get(path));
      } catch (err) {
        if (!(err instanceof APIError && err.status === 404)) throw err;
      }
      const after = editableYAML(await send(path, true));
      if (area.value !== text) return;
      const lines = lineDiff(before, after);
      diff.replaceChildren(...lines.map(([op, l]) => h('div', { class: op === '+' ? 'add' : op === '-' ? 'del' : '' }, `${op} ${l}`)));
      diff.hidden = false;
      const changed = lines.some(([op]) => op !== ' ');
      note.textContent = !before ? 'Creates a new object.' : changed ? 'Changes shown below.' : 'No changes.';
      reviewed = text;
      apply.disabled = false;
    } catch (err) {
      note.textContent = '';
      fail(err);
    }
  });

  apply.addEventListener('click', async () => {
    if (reviewed !== area.value) return;
    error.replaceChildren();
    note.textContent = 'Applying…';
    apply.disabled = true;
    try {
      const obj = await send(target(), false);
      note.textContent = `Applied (resourceVersion ${obj.metadata.resourceVersion}).`;
      card.dataset.applied = obj.metadata.name;
      onApplied(obj);
    } catch (err) {
      note.textContent = '';
      fail(err);
      apply.disabled = false;
    }
  });
  return card;
}
