//! The Widget plugin in std-only Rust on the native ABI, with
//! sdk/rust/setpoint.rs: the logic of examples/widget/operator. For each
//! Widget it desires one WidgetProvision (same name and namespace) carrying
//! the widget's size and capacity, and reports status.state (Provisioning
//! until the observed provision matches, then Ready), status.capacity and
//! status.lastProvisioned; on deletion it records a Deprovisioned event with
//! the capacity given back. `make plugins` builds it to
//! bin/wasm/widget-rust.wasm with Debian's rustc:
//!
//! ```sh
//! rustc --target wasm32-wasi --crate-type cdylib --edition 2021 -O -C strip=symbols \
//!   -o bin/wasm/widget-rust.wasm plugins/widget-rust/lib.rs
//! ```

#[path = "../../sdk/rust/setpoint.rs"]
mod setpoint;

use setpoint::Json;
use std::time::{SystemTime, UNIX_EPOCH};

const CHILD_KEY: &str = "WidgetProvision.example.setpoint.dev";

// The response of the last call: the host reads it after the export returns.
static OUT: setpoint::Buffer = setpoint::Buffer::new();

fn capacity_of(size: Json) -> i64 {
    if size.is_str("small") {
        1
    } else if size.is_str("medium") {
        4
    } else if size.is_str("large") {
        16
    } else {
        0
    }
}

/// The current UTC time as 2006-01-02T15:04:05Z.
fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

#[no_mangle]
pub extern "C" fn reconcile(ptr: *const u8, len: i32) -> i64 {
    let req = unsafe { setpoint::input(ptr, len) };
    let out = OUT.get();
    out.clear();
    let obj = req.get("object");
    let meta = obj.get("metadata");
    let spec = obj.get("spec");
    let status = obj.get("status");
    let name = meta.get("name");
    let size = spec.get("size");
    let capacity = capacity_of(size);
    if capacity == 0 {
        // A terminal error: not retried until the widget changes.
        out.extend_from_slice(b"{\"error\":\"spec.size must be small, medium or large, not ");
        out.extend_from_slice(size.str_body());
        out.extend_from_slice(b"\",\"terminal\":true}");
        return setpoint::pack(out);
    }

    let ready = req.get("children").get(CHILD_KEY).members().any(|(_, c)| {
        let cs = c.get("spec");
        c.get("metadata").get("name") == name && cs.get("size") == size && cs.get("capacity").int() == capacity
    });
    let mut prev = status.get("capacity").int();
    let last = status.get("lastProvisioned");
    let mut fresh = None;
    if ready && (last.is_missing() || prev != capacity) {
        fresh = Some(now_rfc3339());
        prev = capacity;
        if req.get("config").get("log").is_str("true") {
            setpoint::log("info", "widget provisioned");
        }
    }

    out.extend_from_slice(b"{\"status\":{\"state\":");
    out.extend_from_slice(if ready { b"\"Ready\"" as &[u8] } else { b"\"Provisioning\"" });
    out.extend_from_slice(b",\"provision\":");
    name.write_to(out);
    if prev != 0 {
        out.extend_from_slice(format!(",\"capacity\":{}", prev).as_bytes());
    }
    if let Some(now) = &fresh {
        out.extend_from_slice(b",\"lastProvisioned\":");
        setpoint::quote(out, now);
    } else if !last.is_missing() {
        out.extend_from_slice(b",\"lastProvisioned\":");
        last.write_to(out);
    }
    out.extend_from_slice(b"},\"children\":[{\"apiVersion\":\"example.setpoint.dev/v1\",\"kind\":\"WidgetProvision\",\"metadata\":{\"name\":");
    name.write_to(out);
    out.extend_from_slice(b",\"namespace\":");
    meta.get("namespace").write_to(out);
    out.extend_from_slice(b",\"labels\":{\"example.setpoint.dev/widget\":");
    name.write_to(out);
    out.extend_from_slice(b"}},\"spec\":{\"widget\":");
    spec.get("name").write_to(out);
    out.extend_from_slice(b",\"size\":");
    size.write_to(out);
    out.extend_from_slice(format!(",\"capacity\":{}}}}}]}}", capacity).as_bytes());
    setpoint::pack(out)
}

#[no_mangle]
pub extern "C" fn finalize(ptr: *const u8, len: i32) -> i64 {
    let req = unsafe { setpoint::input(ptr, len) };
    let out = OUT.get();
    out.clear();
    let name = req.get("object").get("metadata").get("name");
    let released: i64 = req.get("children").get(CHILD_KEY).members().map(|(_, c)| c.get("spec").get("capacity").int()).sum();
    out.extend_from_slice(b"{\"done\":true,\"events\":[{\"type\":\"Normal\",\"reason\":\"Deprovisioned\",\"message\":\"widget ");
    out.extend_from_slice(name.str_body());
    out.extend_from_slice(format!(" released {} capacity units\"}}]}}", released).as_bytes());
    setpoint::pack(out)
}
