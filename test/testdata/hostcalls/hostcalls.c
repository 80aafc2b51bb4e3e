/*
 * A test guest for sdk/c/setpoint.h (TestLanguageHelpersHostCalls): its
 * reconcile gets the object the request's config names through the `get`
 * host function (a response longer than setpoint_call's first buffer, so it
 * is fetched with `result`), logs, and answers with the object's spec and
 * the lengths it saw.
 */
#define SETPOINT_IMPLEMENTATION
#include "setpoint.h"

#include <string.h>

static setpoint_buf out, req;

SETPOINT_EXPORT("reconcile")
int64_t reconcile(const char *ptr, int32_t len) {
    setpoint_json in = {ptr, (size_t)len};
    setpoint_json name = setpoint_json_get(setpoint_json_get(in, "config"), "get");
    if (name.n == 0) {
        static const char msg[] = "config.get is not set";
        return setpoint_fail(msg, sizeof msg - 1);
    }
    setpoint_buf_reset(&req);
    setpoint_buf_str(&req, "{\"apiVersion\":\"example.setpoint.dev/v1\",\"kind\":\"Widget\",\"namespace\":\"default\",\"name\":");
    setpoint_buf_value(&req, name);
    setpoint_buf_str(&req, "}");
    setpoint_json resp = setpoint_call(setpoint_host_get, req.data, req.len);
    size_t got = resp.n;
    setpoint_json spec = setpoint_json_get(setpoint_json_get(resp, "object"), "spec");

    setpoint_buf_reset(&out);
    setpoint_buf_str(&out, "{\"status\":{\"responseBytes\":");
    setpoint_buf_int(&out, (int64_t)got);
    setpoint_buf_str(&out, ",\"spec\":");
    setpoint_buf_append(&out, spec.p, spec.n);
    /* The spec aliases the host-call buffer: copy it before the next call. */
    setpoint_json err = setpoint_log("info", "got the object");
    setpoint_buf_str(&out, ",\"logError\":");
    setpoint_buf_value(&out, err);
    setpoint_buf_str(&out, "}}");
    return setpoint_pack(out.data, out.len);
}
