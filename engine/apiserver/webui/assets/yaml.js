// yaml.js: a small YAML emitter for showing objects (block style, strings
// quoted only when they would read as something else).

const PLAIN = /^[A-Za-z0-9_./@][A-Za-z0-9 _./@:+-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|y|n|[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?|0x[0-9a-fA-F]+|\.inf|\.nan)$/i;

function scalar(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  const s = String(v);
  if (s === '' || !PLAIN.test(s) || RESERVED.test(s) || / $/.test(s) || /: /.test(s) || / #/.test(s)) return JSON.stringify(s);
  return s;
}

function key(k) {
  return PLAIN.test(k) && !RESERVED.test(k) && !/: | #/.test(k) ? k : JSON.stringify(k);
}

const isObj = (v) => v !== null && typeof v === 'object';
const empty = (v) => (Array.isArray(v) ? v.length === 0 : Object.keys(v).length === 0);

function emit(v, indent, out) {
  const pad = '  '.repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (isObj(item) && !empty(item)) {
        const sub = [];
        emit(item, indent + 1, sub);
        out.push(pad + '- ' + sub[0].trimStart());
        for (const line of sub.slice(1)) out.push(line);
      } else {
        out.push(pad + '- ' + (isObj(item) ? (Array.isArray(item) ? '[]' : '{}') : multiline(item, indent + 1)));
      }
    }
    return;
  }
  for (const [k, val] of Object.entries(v)) {
    if (isObj(val) && !empty(val)) {
      out.push(pad + key(k) + ':');
      emit(val, Array.isArray(val) ? indent : indent + 1, out);
    } else {
      out.push(pad + key(k) + ': ' + (isObj(val) ? (Array.isArray(val) ? '[]' : '{}') : multiline(val, indent + 1)));
    }
  }
}

function multiline(v, indent) {
  if (typeof v === 'string' && v.includes('\n') && !/[\r\t]/.test(v)) {
    const pad = '  '.repeat(indent);
    return '|' + (v.endsWith('\n') ? '' : '-') + '\n' + v.replace(/\n$/, '').split('\n').map((l) => pad + l).join('\n');
  }
  return scalar(v);
}

/** toYAML renders a JSON value as YAML. */
export function toYAML(v) {
  if (!isObj(v)) return scalar(v) + '\n';
  const out = [];
  emit(v, 0, out);
  return out.join('\n') + '\n';
}
