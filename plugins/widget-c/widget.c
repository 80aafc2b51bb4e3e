/*
 * The Widget plugin in C on the native ABI, written from docs/ABI.md with
 * sdk/c/setpoint.h: the logic of examples/widget/operator. For each Widget
 * it desires one WidgetProvision (same name and namespace) carrying the
 * widget's size and capacity, and reports status.state (Provisioning until
 * the observed provision matches, then Ready), status.capacity and
 * status.lastProvisioned; on deletion it records a Deprovisioned event with
 * the capacity given back. `make plugins` builds it to
 * bin/wasm/widget-c.wasm:
 *
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -I sdk/c \
 *     -o bin/wasm/widget-c.wasm plugins/widget-c/widget.c
 */
#define SETPOINT_IMPLEMENTATION
#include "setpoint.h"

#include <string.h>
#include <time.h>

#define CHILD_KEY "WidgetProvision.example.setpoint.dev"

static setpoint_buf out;

static int64_t capacity_of(setpoint_json size) {
    if (setpoint_json_eq(size, "small")) return 1;
    if (setpoint_json_eq(size, "medium")) return 4;
    if (setpoint_json_eq(size, "large")) return 16;
    return 0;
}

/* now_rfc3339 writes the current UTC time as 2006-01-02T15:04:05Z. */
static void now_rfc3339(char buf[32]) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

SETPOINT_EXPORT("reconcile")
int64_t reconcile(const char *ptr, int32_t len) {
    setpoint_json req = {ptr, (size_t)len};
    setpoint_json obj = setpoint_json_get(req, "object");
    setpoint_json meta = setpoint_json_get(obj, "metadata");
    setpoint_json spec = setpoint_json_get(obj, "spec");
    setpoint_json status = setpoint_json_get(obj, "status");
    setpoint_json name = setpoint_json_get(meta, "name");
    setpoint_json size = setpoint_json_get(spec, "size");
    int64_t capacity = capacity_of(size);

    setpoint_buf_reset(&out);
    if (capacity == 0) {
        /* A terminal error: not retried until the widget changes. */
        setpoint_buf_str(&out, "{\"error\":\"spec.size must be small, medium or large, not ");
        if (size.n >= 2) setpoint_buf_append(&out, size.p + 1, size.n - 2); /* a string's escaped text */
        setpoint_buf_str(&out, "\",\"terminal\":true}");
        return setpoint_pack(out.data, out.len);
    }

    const char *state = "Provisioning";
    setpoint_json children = setpoint_json_get(setpoint_json_get(req, "children"), CHILD_KEY);
    setpoint_json child;
    size_t pos = 0;
    while (setpoint_json_next(children, &pos, 0, &child)) {
        setpoint_json cs = setpoint_json_get(child, "spec");
        if (setpoint_json_same(setpoint_json_get(setpoint_json_get(child, "metadata"), "name"), name) &&
            setpoint_json_same(setpoint_json_get(cs, "size"), size) &&
            setpoint_json_int(setpoint_json_get(cs, "capacity")) == capacity)
            state = "Ready";
    }

    int64_t prev = setpoint_json_int(setpoint_json_get(status, "capacity"));
    setpoint_json last = setpoint_json_get(status, "lastProvisioned");
    char now[32];
    int fresh = 0;
    if (strcmp(state, "Ready") == 0 && (last.n == 0 || prev != capacity)) {
        now_rfc3339(now);
        fresh = 1;
        prev = capacity;
        if (setpoint_json_eq(setpoint_json_get(setpoint_json_get(req, "config"), "log"), "true"))
            setpoint_log("info", "widget provisioned");
    }

    setpoint_buf_str(&out, "{\"status\":{\"state\":\"");
    setpoint_buf_str(&out, state);
    setpoint_buf_str(&out, "\",\"provision\":");
    setpoint_buf_value(&out, name);
    if (prev != 0) {
        setpoint_buf_str(&out, ",\"capacity\":");
        setpoint_buf_int(&out, prev);
    }
    if (fresh) {
        setpoint_buf_str(&out, ",\"lastProvisioned\":");
        setpoint_buf_quote(&out, now, strlen(now));
    } else if (last.n != 0) {
        setpoint_buf_str(&out, ",\"lastProvisioned\":");
        setpoint_buf_value(&out, last);
    }
    setpoint_buf_str(&out, "},\"children\":[{\"apiVersion\":\"example.setpoint.dev/v1\","
                           "\"kind\":\"WidgetProvision\",\"metadata\":{\"name\":");
    setpoint_buf_value(&out, name);
    setpoint_buf_str(&out, ",\"namespace\":");
    setpoint_buf_value(&out, setpoint_json_get(meta, "namespace"));
    setpoint_buf_str(&out, ",\"labels\":{\"example.setpoint.dev/widget\":");
    setpoint_buf_value(&out, name);
    setpoint_buf_str(&out, "}},\"spec\":{\"widget\":");
    setpoint_buf_value(&out, setpoint_json_get(spec, "name"));
    setpoint_buf_str(&out, ",\"size\":");
    setpoint_buf_value(&out, size);
    setpoint_buf_str(&out, ",\"capacity\":");
    setpoint_buf_int(&out, capacity);
    setpoint_buf_str(&out, "}}]}");
    return setpoint_pack(out.data, out.len);
}

SETPOINT_EXPORT("finalize")
int64_t finalize(const char *ptr, int32_t len) {
    setpoint_json req = {ptr, (size_t)len};
    setpoint_json name = setpoint_json_get(setpoint_json_get(setpoint_json_get(req, "object"), "metadata"), "name");
    setpoint_json children = setpoint_json_get(setpoint_json_get(req, "children"), CHILD_KEY);
    setpoint_json child;
    size_t pos = 0;
    int64_t released = 0;
    while (setpoint_json_next(children, &pos, 0, &child))
        released += setpoint_json_int(setpoint_json_get(setpoint_json_get(child, "spec"), "capacity"));

    setpoint_buf_reset(&out);
    setpoint_buf_str(&out, "{\"done\":true,\"events\":[{\"type\":\"Normal\",\"reason\":\"Deprovisioned\",\"message\":\"widget ");
    if (name.n >= 2) setpoint_buf_append(&out, name.p + 1, name.n - 2);
    setpoint_buf_str(&out, " released ");
    setpoint_buf_int(&out, released);
    setpoint_buf_str(&out, " capacity units\"}]}");
    return setpoint_pack(out.data, out.len);
}
