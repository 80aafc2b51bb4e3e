// diff.js: a line diff (longest common subsequence) for showing what an
// apply would change. Objects are small; past LIMIT lines on either side it
// shows the old text removed and the new added rather than spend quadratic
// time.

const LIMIT = 3000;

/** lineDiff returns [op, line] pairs, op ' ', '-' or '+'. */
export function lineDiff(a, b) {
  const x = a ? a.replace(/\n$/, '').split('\n') : [];
  const y = b ? b.replace(/\n$/, '').split('\n') : [];
  if (x.length > LIMIT || y.length > LIMIT) return [...x.map((l) => ['-', l]), ...y.map((l) => ['+', l])];
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push(['-', x[i++]]);
    else out.push(['+', y[j++]]);
  }
  while (i < n) out.push(['-', x[i++]]);
  while (j < m) out.push(['+', y[j++]]);
  return out;
}
