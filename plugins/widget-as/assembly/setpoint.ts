// setpoint.ts: what an AssemblyScript plugin on Setpoint's Extism ABI
// (docs/ABI.md) needs beyond @extism/as-pdk. Copy it next to the plugin's
// index.ts.
//
//   - input() and output(): the request and the response as UTF-8 bytes,
//     moved eight bytes per kernel call (input_load_u64, store_u64), never
//     through the kit's per-byte store_u8 paths (Memory.allocateBytes,
//     Memory.allocateString, Host.log), and never with Host.outputString,
//     which sets the output's length in UTF-16 units.
//   - hostCall(): one call of a Setpoint host function (log, get, list,
//     emit_event, create, update, patch, delete of extism:host/user).
//   - abort(): AssemblyScript's abort routed to error_set, so a failed
//     assertion fails the call with its message (build with
//     --use abort=assembly/setpoint/abort: the default abort imports
//     env.abort, which the host does not offer, and refuses the module).
//   - nowRFC3339(): the wall clock through WASI's clock_time_get, which the
//     host offers to every module.
//   - Json: a raw JSON value scanned in place, without decoding.
import { Host } from "@extism/as-pdk";
import { alloc, error_set, length, load_u64, load_u8, store_u64, store_u8 } from "@extism/as-pdk/lib/env";

// Setpoint's host functions (module extism:host/user): each takes the
// offset of a request document in Extism memory and returns the offset of
// the response document.
@external("extism:host/user", "log")
export declare function host_log(req: u64): u64;

@external("wasi_snapshot_preview1", "clock_time_get")
declare function clock_time_get(id: u32, precision: u64, out: usize): u16;

export function input(): Uint8Array {
  return Host.input();
}

// output sets the response; bytes must be UTF-8.
export function output(bytes: Uint8Array): void {
  Host.output(bytes);
}

// toExtism copies bytes into a new block of Extism memory.
function toExtism(bytes: Uint8Array): u64 {
  const n = bytes.length;
  const offs = alloc(n);
  let i = 0;
  for (; i + 8 <= n; i += 8) store_u64(offs + i, load<u64>(bytes.dataStart + i));
  for (; i < n; i++) store_u8(offs + i, bytes[i]);
  return offs;
}

// fromExtism copies a block of Extism memory out.
function fromExtism(offs: u64): Uint8Array {
  const n = <i32>length(offs);
  const out = new Uint8Array(n);
  let i = 0;
  for (; i + 8 <= n; i += 8) store<u64>(out.dataStart + i, load_u64(offs + i));
  for (; i < n; i++) out[i] = load_u8(offs + i);
  return out;
}

// hostCall sends the request document req through fn and returns the
// response document.
export function hostCall(fn: (req: u64) => u64, req: string): Uint8Array {
  return fromExtism(fn(toExtism(Uint8Array.wrap(String.UTF8.encode(req)))));
}

export function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const msg = (message === null ? "abort" : message) + " at " + (fileName === null ? "?" : fileName) +
    ":" + line.toString() + ":" + column.toString();
  error_set(toExtism(Uint8Array.wrap(String.UTF8.encode(msg))));
  unreachable();
}

function pad(n: i64, w: i32): string {
  let s = n.toString();
  while (s.length < w) s = "0" + s;
  return s;
}

// nowRFC3339 is the current UTC time as 2006-01-02T15:04:05Z.
export function nowRFC3339(): string {
  const buf = new ArrayBuffer(8);
  clock_time_get(0, 1000, changetype<usize>(buf));
  const secs = <i64>(load<u64>(changetype<usize>(buf)) / 1000000000);
  const days = secs / 86400;
  const rem = secs % 86400;
  // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
  const z = days + 719468;
  const era = z / 146097;
  const doe = z - era * 146097;
  const yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const mp = (5 * doy + 2) / 153;
  const d = doy - (153 * mp + 2) / 5 + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(rem / 3600, 2) + ":" +
    pad((rem / 60) % 60, 2) + ":" + pad(rem % 60, 2) + "Z";
}

function isSpace(c: u8): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

// Json is a raw JSON value: bytes [start, end) of a document (a string
// includes its quotes); a missing value has start == end.
export class Json {
  constructor(public doc: Uint8Array, public start: i32, public end: i32) {}

  static of(doc: Uint8Array): Json {
    return new Json(doc, 0, doc.length);
  }

  missing(): bool {
    return this.start >= this.end;
  }

  // get is member key of an object, or a missing value.
  get(key: string): Json {
    if (this.missing() || this.doc[this.start] != 0x7b) return new Json(this.doc, 0, 0);
    const it = new Members(this);
    while (it.next()) {
      if (it.key.isStr(key)) return it.value;
    }
    return new Json(this.doc, 0, 0);
  }

  members(): Members {
    return new Members(this);
  }

  // isStr reports whether the value is the JSON string of s (ASCII, with
  // nothing JSON escapes).
  isStr(s: string): bool {
    if (this.end - this.start != s.length + 2 || this.doc[this.start] != 0x22) return false;
    for (let i = 0; i < s.length; i++) {
      if (<i32>this.doc[this.start + 1 + i] != s.charCodeAt(i)) return false;
    }
    return true;
  }

  same(o: Json): bool {
    const n = this.end - this.start;
    if (n != o.end - o.start) return false;
    for (let i = 0; i < n; i++) {
      if (this.doc[this.start + i] != o.doc[o.start + i]) return false;
    }
    return true;
  }

  int(): i64 {
    let i = this.start;
    const neg = i < this.end && this.doc[i] == 0x2d;
    if (neg) i++;
    let x: i64 = 0;
    for (; i < this.end; i++) {
      const c = this.doc[i];
      if (c < 0x30 || c > 0x39) break;
      x = x * 10 + <i64>(c - 0x30);
    }
    return neg ? -x : x;
  }

  // raw is the value's JSON text, or "" (an empty JSON string) when missing.
  raw(): string {
    if (this.missing()) return '""';
    return String.UTF8.decode(this.doc.slice(this.start, this.end).buffer);
  }

  // body is the escaped text of a string, without its quotes.
  body(): string {
    if (this.end - this.start < 2) return "";
    return String.UTF8.decode(this.doc.slice(this.start + 1, this.end - 1).buffer);
  }
}

// skip returns the index just past the value that starts at i.
function skip(d: Uint8Array, i: i32, n: i32): i32 {
  if (i >= n) return n;
  const c = d[i];
  if (c == 0x22) {
    for (i++; i < n; i++) {
      if (d[i] == 0x5c) i++;
      else if (d[i] == 0x22) return i + 1;
    }
    return n;
  }
  if (c == 0x7b || c == 0x5b) {
    let depth = 0;
    for (; i < n; i++) {
      const x = d[i];
      if (x == 0x22) i = skip(d, i, n) - 1;
      else if (x == 0x7b || x == 0x5b) depth++;
      else if (x == 0x7d || x == 0x5d) {
        if (--depth == 0) return i + 1;
      }
    }
    return n;
  }
  while (i < n) {
    const x = d[i];
    if (x == 0x2c || x == 0x7d || x == 0x5d || isSpace(x)) break;
    i++;
  }
  return i;
}

// Members iterates an object's members (key, value) or an array's
// elements (value).
export class Members {
  key: Json;
  value: Json;
  pos: i32;
  constructor(public v: Json) {
    this.key = new Json(v.doc, 0, 0);
    this.value = new Json(v.doc, 0, 0);
    this.pos = v.start + 1;
  }

  next(): bool {
    const d = this.v.doc;
    const n = this.v.end;
    if (this.v.missing()) return false;
    const object = d[this.v.start] == 0x7b;
    if (!object && d[this.v.start] != 0x5b) return false;
    let i = this.pos;
    while (i < n && isSpace(d[i])) i++;
    if (i < n && d[i] == 0x2c) i++;
    while (i < n && isSpace(d[i])) i++;
    if (i >= n || d[i] == 0x7d || d[i] == 0x5d) return false;
    if (object) {
      const k = skip(d, i, n);
      this.key = new Json(d, i, k);
      i = k;
      while (i < n && isSpace(d[i])) i++;
      if (i >= n || d[i] != 0x3a) return false;
      i++;
      while (i < n && isSpace(d[i])) i++;
    }
    const e = skip(d, i, n);
    this.value = new Json(d, i, e);
    this.pos = e;
    return true;
  }
}
