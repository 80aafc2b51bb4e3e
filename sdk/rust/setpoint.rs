//! setpoint.rs: the native ABI of Setpoint plugins (docs/ABI.md, version 1)
//! for std-only Rust, in one file with no crate dependency. Copy it next to
//! the plugin's lib.rs and declare it with `mod setpoint;`.
//!
//! It carries the ABI's own exports (`setpoint_abi_version`,
//! `setpoint_alloc`); the plugin exports its handlers and returns
//! `setpoint::pack` (or `setpoint::fail`) of a buffer it keeps:
//!
//! ```ignore
//! mod setpoint;
//! use setpoint::Json;
//!
//! #[no_mangle]
//! pub extern "C" fn reconcile(ptr: *const u8, len: i32) -> i64 {
//!     let req = unsafe { setpoint::input(ptr, len) };
//!     let name = req.get("object").get("metadata").get("name");
//!     let out = OUT.get();
//!     out.clear();
//!     ...
//!     setpoint::pack(out)
//! }
//!
//! static OUT: setpoint::Buffer = setpoint::Buffer::new();
//! ```
//!
//! Build a cdylib for WASI:
//!
//! ```sh
//! rustc --target wasm32-wasi --crate-type cdylib --edition 2021 -O -C strip=symbols -o plugin.wasm lib.rs
//! ```
//!
//! `setpoint_alloc` references the import of
//! `wasi_snapshot_preview1.sched_yield` so that the module keeps it: a
//! native-ABI module without that import runs under the host's slow
//! preemption path (docs/ABI.md, "Exports").
#![allow(dead_code)]

use std::cell::UnsafeCell;

/// A byte buffer kept in a static across calls: the input region, the
/// output region the host reads after an export returns, the host-call
/// buffer. A module instance runs one call at a time on one thread, so
/// `get` hands out the one reference in use.
pub struct Buffer(UnsafeCell<Vec<u8>>);

// Sound because a Wasm guest has one thread.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub const fn new() -> Self {
        Buffer(UnsafeCell::new(Vec::new()))
    }

    /// The buffer. Hold the reference only within one call, and take one
    /// at a time.
    #[allow(clippy::mut_from_ref)]
    pub fn get(&self) -> &mut Vec<u8> {
        unsafe { &mut *self.0.get() }
    }
}

/// The ABI version this file speaks.
pub const ABI_VERSION: i32 = 1;
/// Bit 31 of an export's result length: the region holds a failure message.
pub const FAILURE_FLAG: u32 = 1 << 31;

/// A host function of module `setpoint`: (req, req_len, out, out_cap) ->
/// the response's length.
pub type HostFn = unsafe extern "C" fn(*const u8, i32, *mut u8, i32) -> i32;

#[link(wasm_import_module = "setpoint")]
extern "C" {
    #[link_name = "log"]
    pub fn host_log(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "get"]
    pub fn host_get(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "list"]
    pub fn host_list(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "emit_event"]
    pub fn host_emit_event(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "create"]
    pub fn host_create(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "update"]
    pub fn host_update(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "patch"]
    pub fn host_patch(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    #[link_name = "delete"]
    pub fn host_delete(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    /// Sends `{"method","url","headers":{..},"body":"<base64>"}` to the
    /// outside world under the Plugin's spec.egress (ABI 1.2) and answers
    /// `{"status","headers","body":"<base64>"}`, or `{"error","reason"}`
    /// when there is no response (reason `Forbidden`: not granted); see
    /// docs/ABI.md. Call it with `call(host_http, req)`.
    #[link_name = "http"]
    pub fn host_http(req: *const u8, req_len: i32, out: *mut u8, out_cap: i32) -> i32;
    /// Copies the pending response of the last host call into out.
    #[link_name = "result"]
    pub fn host_result(out: *mut u8, out_cap: i32) -> i32;
}

#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    /// The yield the host's preemption rewrite calls at loop heads.
    #[link_name = "sched_yield"]
    fn wasi_sched_yield() -> i32;
}

#[no_mangle]
pub extern "C" fn setpoint_abi_version() -> i32 {
    ABI_VERSION
}

static INPUT: Buffer = Buffer::new();

/// Returns a region of at least size bytes for the host's input, reserved
/// until the next call.
#[no_mangle]
pub extern "C" fn setpoint_alloc(size: i32) -> *mut u8 {
    if size < 0 {
        // Never taken (the host passes a length): the call keeps the
        // sched_yield import in the module for the host's fast preemption.
        unsafe { wasi_sched_yield() };
        return std::ptr::null_mut();
    }
    let input = INPUT.get();
    let n = (size as usize).max(1);
    if input.len() < n {
        *input = vec![0; n.max(2 * input.len())];
    }
    input.as_mut_ptr()
}

/// The request an export received, as a raw JSON value.
///
/// # Safety
/// ptr and len must be the arguments the host passed to the export.
pub unsafe fn input<'a>(ptr: *const u8, len: i32) -> Json<'a> {
    Json(std::slice::from_raw_parts(ptr, len as usize))
}

/// An export's result for the response in out, which must stay unchanged
/// until the next call into the module (keep it in a static Buffer).
pub fn pack(out: &[u8]) -> i64 {
    ((out.as_ptr() as u64) << 32 | out.len() as u64) as i64
}

/// An export's result for a failure message: the call fails with
/// `host: guest failure` and the message.
pub fn fail(msg: &'static str) -> i64 {
    ((msg.as_ptr() as u64) << 32 | (msg.len() as u64 | FAILURE_FLAG as u64)) as i64
}

/// A raw JSON value inside a document (a string includes its quotes); a
/// missing value is empty. Lookups scan in place without decoding.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Json<'a>(pub &'a [u8]);

impl<'a> Json<'a> {
    /// Member key of an object, or a missing value.
    pub fn get(self, key: &str) -> Json<'a> {
        if self.0.first() != Some(&b'{') {
            return Json(&[]);
        }
        self.members()
            .find(|(k, _)| k.is_str(key))
            .map(|(_, v)| v)
            .unwrap_or(Json(&[]))
    }

    /// The members of an object (key, value) or the elements of an array
    /// (a missing key, value).
    pub fn members(self) -> Members<'a> {
        Members { v: self.0, pos: 1 }
    }

    pub fn is_missing(self) -> bool {
        self.0.is_empty()
    }

    /// Whether the value is the JSON string of s (s holds nothing JSON
    /// escapes).
    pub fn is_str(self, s: &str) -> bool {
        let b = self.0;
        b.len() == s.len() + 2 && b[0] == b'"' && &b[1..b.len() - 1] == s.as_bytes()
    }

    /// The escaped text of a string, without its quotes.
    pub fn str_body(self) -> &'a [u8] {
        if self.0.len() >= 2 && self.0[0] == b'"' {
            &self.0[1..self.0.len() - 1]
        } else {
            &[]
        }
    }

    /// The integer the value holds, 0 when it holds none.
    pub fn int(self) -> i64 {
        let (neg, digits) = match self.0.first() {
            Some(b'-') => (true, &self.0[1..]),
            _ => (false, self.0),
        };
        let mut x: i64 = 0;
        for &c in digits.iter().take_while(|c| c.is_ascii_digit()) {
            x = x * 10 + (c - b'0') as i64;
        }
        if neg {
            -x
        } else {
            x
        }
    }

    /// Appends the value as it is, or "" when it is missing.
    pub fn write_to(self, out: &mut Vec<u8>) {
        if self.0.is_empty() {
            out.extend_from_slice(b"\"\"");
        } else {
            out.extend_from_slice(self.0);
        }
    }
}

/// Iterator of Json::members.
pub struct Members<'a> {
    v: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (Json<'a>, Json<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let v = self.v;
        let object = match v.first() {
            Some(b'{') => true,
            Some(b'[') => false,
            _ => return None,
        };
        let mut i = ws(v, self.pos);
        if v.get(i) == Some(&b',') {
            i = ws(v, i + 1);
        }
        match v.get(i) {
            None | Some(b'}') | Some(b']') => return None,
            _ => {}
        }
        let mut key = Json(&[]);
        if object {
            let k = skip(v, i);
            key = Json(&v[i..k]);
            i = ws(v, k);
            if v.get(i) != Some(&b':') {
                return None;
            }
            i = ws(v, i + 1);
        }
        let e = skip(v, i);
        self.pos = e;
        Some((key, Json(&v[i..e])))
    }
}

fn ws(v: &[u8], mut i: usize) -> usize {
    while i < v.len() && matches!(v[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The index just past the value that starts at i.
fn skip(v: &[u8], mut i: usize) -> usize {
    let n = v.len();
    match v.get(i) {
        None => n,
        Some(b'"') => {
            i += 1;
            while i < n {
                match v[i] {
                    b'\\' => i += 2,
                    b'"' => return i + 1,
                    _ => i += 1,
                }
            }
            n
        }
        Some(b'{') | Some(b'[') => {
            let mut depth = 0;
            while i < n {
                match v[i] {
                    b'"' => {
                        i = skip(v, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            n
        }
        _ => {
            while i < n && !matches!(v[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            i
        }
    }
}

/// Appends s as a JSON string.
pub fn quote(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', c]),
            0..=0x1f => out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

static HOST_BUF: Buffer = Buffer::new();

/// Calls host function f with the request document req and returns the
/// response document, valid until the next call.
pub fn call(f: HostFn, req: &[u8]) -> Json<'static> {
    let buf = HOST_BUF.get();
    if buf.len() < 4096 {
        *buf = vec![0; 4096];
    }
    let mut n = unsafe { f(req.as_ptr(), req.len() as i32, buf.as_mut_ptr(), buf.len() as i32) };
    if n as usize > buf.len() {
        *buf = vec![0; n as usize];
        n = unsafe { host_result(buf.as_mut_ptr(), n) };
    }
    Json(&buf[..n.max(0) as usize])
}

/// Logs message at level (debug, info, warn, error) through the host's log
/// function; it returns the host's error member, if any.
pub fn log(level: &str, message: &str) -> Json<'static> {
    let mut req = Vec::with_capacity(64 + message.len());
    req.extend_from_slice(b"{\"level\":");
    quote(&mut req, level);
    req.extend_from_slice(b",\"message\":");
    quote(&mut req, message);
    req.push(b'}');
    call(host_log, &req).get("error")
}
