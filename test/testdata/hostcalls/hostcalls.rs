//! A test guest for sdk/rust/setpoint.rs (TestLanguageHelpersHostCalls):
//! its reconcile gets the object the request's config names through the
//! `get` host function (a response longer than setpoint::call's first
//! buffer, so it is fetched with `result`), logs, and answers with the
//! object's spec and the lengths it saw.

#[path = "../../../sdk/rust/setpoint.rs"]
mod setpoint;

static OUT: setpoint::Buffer = setpoint::Buffer::new();

#[no_mangle]
pub extern "C" fn reconcile(ptr: *const u8, len: i32) -> i64 {
    let input = unsafe { setpoint::input(ptr, len) };
    let name = input.get("config").get("get");
    if name.is_missing() {
        return setpoint::fail("config.get is not set");
    }
    let out = OUT.get();
    out.clear();
    let mut req = b"{\"apiVersion\":\"example.setpoint.dev/v1\",\"kind\":\"Widget\",\"namespace\":\"default\",\"name\":".to_vec();
    name.write_to(&mut req);
    req.push(b'}');
    let resp = setpoint::call(setpoint::host_get, &req);
    out.extend_from_slice(format!("{{\"status\":{{\"responseBytes\":{},\"spec\":", resp.0.len()).as_bytes());
    resp.get("object").get("spec").write_to(out);
    // The spec aliases the host-call buffer: copy it before the next call.
    let err = setpoint::log("info", "got the object");
    out.extend_from_slice(b",\"logError\":");
    err.write_to(out);
    out.extend_from_slice(b"}}");
    setpoint::pack(out)
}
