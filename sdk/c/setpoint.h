/*
 * setpoint.h: the native ABI of Setpoint plugins (docs/ABI.md, version 1)
 * for C, in one header with no dependency beyond wasi-libc. Copy it into a
 * plugin's source tree.
 *
 * In exactly one source file, define SETPOINT_IMPLEMENTATION before
 * including it: that file then carries the ABI's own exports
 * (setpoint_abi_version, setpoint_alloc) and the helpers' bodies. The plugin
 * defines its handlers with SETPOINT_EXPORT:
 *
 *     #define SETPOINT_IMPLEMENTATION
 *     #include "setpoint.h"
 *
 *     SETPOINT_EXPORT("reconcile")
 *     int64_t reconcile(const char *ptr, int32_t len) {
 *         setpoint_json req = {ptr, (size_t)len};
 *         ...
 *         return setpoint_pack(out.data, out.len);
 *     }
 *
 * Build it as a WASI reactor (the host calls _initialize once per instance):
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -o plugin.wasm plugin.c
 *
 * What the header gives:
 *   - setpoint_pack and setpoint_fail: the packed i64 an export returns
 *     (address << 32 | length, bit 31 of the length for a failure message).
 *   - setpoint_alloc: the input region, grown with malloc and reused.
 *   - The host functions of module "setpoint" and setpoint_call, which calls
 *     one and fetches a response too large for its buffer with `result`.
 *   - The import of wasi_snapshot_preview1.sched_yield, referenced from
 *     setpoint_alloc so that the linker keeps it: a native-ABI module
 *     without it runs under the host's slow preemption path (docs/ABI.md,
 *     "Exports").
 *   - setpoint_buf, a growable output buffer with JSON writers, and
 *     setpoint_json, a raw JSON value with a member lookup and an iterator
 *     that scan the input in place, without copying or decoding it.
 */
#ifndef SETPOINT_H
#define SETPOINT_H

#include <stddef.h>
#include <stdint.h>

#define SETPOINT_ABI_VERSION 1
/* Bit 31 of an export's result length: the region holds a failure message. */
#define SETPOINT_FAILURE_FLAG 0x80000000u

#define SETPOINT_EXPORT(name) __attribute__((export_name(name)))
#define SETPOINT_IMPORT(name) __attribute__((import_module("setpoint"), import_name(name)))

/* Host functions (module "setpoint"): the request document at req, the
 * response written at out when it fits in out_cap bytes; each returns the
 * response's length, and a longer one waits for setpoint_host_result. */
typedef int32_t (*setpoint_host_fn)(const void *req, int32_t req_len, void *out, int32_t out_cap);
SETPOINT_IMPORT("log") int32_t setpoint_host_log(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("get") int32_t setpoint_host_get(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("list") int32_t setpoint_host_list(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("emit_event") int32_t setpoint_host_emit_event(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("create") int32_t setpoint_host_create(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("update") int32_t setpoint_host_update(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("patch") int32_t setpoint_host_patch(const void *, int32_t, void *, int32_t);
SETPOINT_IMPORT("delete") int32_t setpoint_host_delete(const void *, int32_t, void *, int32_t);
/* http (ABI 1.2) sends {"method","url","headers":{...},"body":"<base64>"}
 * to the outside world under the Plugin's spec.egress and answers
 * {"status","headers","body":"<base64>"}, or {"error","reason"} when there
 * is no response (reason Forbidden: not granted); see docs/ABI.md. Call it
 * with setpoint_call(setpoint_host_http, req, len). A module imports it
 * only when it calls it. */
SETPOINT_IMPORT("http") int32_t setpoint_host_http(const void *, int32_t, void *, int32_t);
/* result copies the pending response of the last host call into out (at
 * most out_cap bytes) and returns the bytes copied. */
SETPOINT_IMPORT("result") int32_t setpoint_host_result(void *out, int32_t out_cap);

/* The yield the host's preemption rewrite calls at loop heads. */
__attribute__((import_module("wasi_snapshot_preview1"), import_name("sched_yield")))
int32_t setpoint_sched_yield(void);

/* setpoint_pack is an export's result: ptr and len of the output region,
 * which stays valid until the next call into the module. */
static inline int64_t setpoint_pack(const void *ptr, size_t len) {
    return (int64_t)(((uint64_t)(uintptr_t)ptr << 32) | (uint32_t)len);
}

/* setpoint_fail is an export's result for a failure message at msg: the
 * call fails with `host: guest failure` and the message. */
static inline int64_t setpoint_fail(const char *msg, size_t len) {
    return (int64_t)(((uint64_t)(uintptr_t)msg << 32) | ((uint32_t)len | SETPOINT_FAILURE_FLAG));
}

/* A growable byte buffer; a zero value is empty. Keep one per purpose and
 * reset it each call: its memory is reused. */
typedef struct {
    char *data;
    size_t len, cap;
} setpoint_buf;

void setpoint_buf_reset(setpoint_buf *b);
void setpoint_buf_append(setpoint_buf *b, const char *p, size_t n);
void setpoint_buf_str(setpoint_buf *b, const char *s);    /* raw text */
void setpoint_buf_int(setpoint_buf *b, int64_t v);        /* decimal */
void setpoint_buf_quote(setpoint_buf *b, const char *s, size_t n); /* a JSON string of s */

/* A raw JSON value inside a document: p and n are its bytes (a string
 * includes its quotes). A missing value has n == 0. */
typedef struct {
    const char *p;
    size_t n;
} setpoint_json;

/* setpoint_json_get returns member key of object v, or a missing value. */
setpoint_json setpoint_json_get(setpoint_json v, const char *key);
/* setpoint_json_next iterates the elements of array v (key NULL) or the
 * members of object v: *pos starts at 0; it returns 0 at the end. */
int setpoint_json_next(setpoint_json v, size_t *pos, setpoint_json *key, setpoint_json *elem);
/* setpoint_json_int is the integer v holds, 0 when it holds none. */
int64_t setpoint_json_int(setpoint_json v);
/* setpoint_json_eq reports whether v is the JSON string of s (s holds no
 * character that JSON escapes). */
int setpoint_json_eq(setpoint_json v, const char *s);
/* setpoint_json_same reports whether a and b are byte-for-byte the same. */
int setpoint_json_same(setpoint_json a, setpoint_json b);
/* setpoint_buf_value writes v as it is, or "" when it is missing. */
void setpoint_buf_value(setpoint_buf *b, setpoint_json v);

/* setpoint_call calls host function fn with the request document req and
 * returns the response document, valid until the next setpoint_call. */
setpoint_json setpoint_call(setpoint_host_fn fn, const char *req, size_t len);
/* setpoint_log logs message at level (debug, info, warn, error) through
 * the host's log function; it returns the host's error member, if any. */
setpoint_json setpoint_log(const char *level, const char *message);

#ifdef SETPOINT_IMPLEMENTATION
#include <stdlib.h>
#include <string.h>

SETPOINT_EXPORT("setpoint_abi_version")
int32_t setpoint_abi_version(void) { return SETPOINT_ABI_VERSION; }

static char *setpoint_in_;
static size_t setpoint_in_cap_;

/* setpoint_alloc returns a region of at least size bytes for the host's
 * input, reserved until the next setpoint_alloc call; 0 when it cannot. */
SETPOINT_EXPORT("setpoint_alloc")
void *setpoint_alloc(int32_t size) {
    if (size < 0) {
        /* Never taken (the host passes a length); the call keeps the
         * sched_yield import in the module, which the host's fast
         * preemption needs. */
        setpoint_sched_yield();
        return 0;
    }
    if ((size_t)size > setpoint_in_cap_ || setpoint_in_ == 0) {
        size_t n = setpoint_in_cap_ * 2;
        if (n < (size_t)size) n = (size_t)size;
        if (n == 0) n = 1;
        free(setpoint_in_);
        setpoint_in_ = malloc(n);
        setpoint_in_cap_ = setpoint_in_ ? n : 0;
    }
    return setpoint_in_;
}

void setpoint_buf_reset(setpoint_buf *b) { b->len = 0; }

void setpoint_buf_append(setpoint_buf *b, const char *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 512;
        while (c < b->len + n) c *= 2;
        char *d = realloc(b->data, c);
        if (!d) abort();
        b->data = d;
        b->cap = c;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void setpoint_buf_str(setpoint_buf *b, const char *s) { setpoint_buf_append(b, s, strlen(s)); }

void setpoint_buf_int(setpoint_buf *b, int64_t v) {
    char tmp[24];
    size_t i = sizeof tmp;
    uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[--i] = '-';
    setpoint_buf_append(b, tmp + i, sizeof tmp - i);
}

void setpoint_buf_quote(setpoint_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    setpoint_buf_append(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        setpoint_buf_append(b, s + start, i - start);
        char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
        if (c < 0x20) {
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            setpoint_buf_append(b, esc, 6);
        } else {
            setpoint_buf_append(b, esc, 2);
        }
        start = i + 1;
    }
    setpoint_buf_append(b, s + start, n - start);
    setpoint_buf_append(b, "\"", 1);
}

void setpoint_buf_value(setpoint_buf *b, setpoint_json v) {
    if (v.n == 0) setpoint_buf_append(b, "\"\"", 2);
    else setpoint_buf_append(b, v.p, v.n);
}

static size_t setpoint_ws_(const char *p, size_t i, size_t n) {
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
    return i;
}

/* setpoint_skip_ returns the index just past the value that starts at i. */
static size_t setpoint_skip_(const char *p, size_t i, size_t n) {
    if (i >= n) return n;
    if (p[i] == '"') {
        for (i++; i < n; i++) {
            if (p[i] == '\\') i++;
            else if (p[i] == '"') return i + 1;
        }
        return n;
    }
    if (p[i] == '{' || p[i] == '[') {
        int depth = 0;
        for (; i < n; i++) {
            char c = p[i];
            if (c == '"') {
                i = setpoint_skip_(p, i, n) - 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
        }
        return n;
    }
    while (i < n && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\n' &&
           p[i] != '\t' && p[i] != '\r')
        i++;
    return i;
}

int setpoint_json_next(setpoint_json v, size_t *pos, setpoint_json *key, setpoint_json *elem) {
    const char *p = v.p;
    size_t n = v.n, i = *pos;
    if (n == 0 || (p[0] != '{' && p[0] != '[')) return 0;
    i = setpoint_ws_(p, i == 0 ? 1 : i, n);
    if (i < n && p[i] == ',') i = setpoint_ws_(p, i + 1, n);
    if (i >= n || p[i] == '}' || p[i] == ']') return 0;
    if (p[0] == '{') {
        size_t k = setpoint_skip_(p, i, n);
        if (key) *key = (setpoint_json){p + i, k - i};
        i = setpoint_ws_(p, k, n);
        if (i >= n || p[i] != ':') return 0;
        i = setpoint_ws_(p, i + 1, n);
    } else if (key) {
        *key = (setpoint_json){0, 0};
    }
    size_t e = setpoint_skip_(p, i, n);
    if (elem) *elem = (setpoint_json){p + i, e - i};
    *pos = e;
    return 1;
}

int setpoint_json_eq(setpoint_json v, const char *s) {
    size_t n = strlen(s);
    return v.n == n + 2 && v.p[0] == '"' && memcmp(v.p + 1, s, n) == 0 && v.p[n + 1] == '"';
}

int setpoint_json_same(setpoint_json a, setpoint_json b) {
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

setpoint_json setpoint_json_get(setpoint_json v, const char *key) {
    setpoint_json k, e;
    size_t pos = 0;
    if (v.n == 0 || v.p[0] != '{') return (setpoint_json){0, 0};
    while (setpoint_json_next(v, &pos, &k, &e))
        if (setpoint_json_eq(k, key)) return e;
    return (setpoint_json){0, 0};
}

int64_t setpoint_json_int(setpoint_json v) {
    int64_t x = 0;
    size_t i = 0;
    int neg = v.n > 0 && v.p[0] == '-';
    if (neg) i++;
    for (; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++) x = x * 10 + (v.p[i] - '0');
    return neg ? -x : x;
}

static setpoint_buf setpoint_host_buf_;

setpoint_json setpoint_call(setpoint_host_fn fn, const char *req, size_t len) {
    setpoint_buf *b = &setpoint_host_buf_;
    if (b->cap < 4096) {
        char *d = realloc(b->data, 4096);
        if (!d) abort();
        b->data = d;
        b->cap = 4096;
    }
    int32_t n = fn(req, (int32_t)len, b->data, (int32_t)b->cap);
    if (n > (int32_t)b->cap) {
        char *d = realloc(b->data, (size_t)n);
        if (!d) abort();
        b->data = d;
        b->cap = (size_t)n;
        n = setpoint_host_result(b->data, n);
    }
    if (n < 0) n = 0;
    return (setpoint_json){b->data, (size_t)n};
}

setpoint_json setpoint_log(const char *level, const char *message) {
    static setpoint_buf req;
    setpoint_buf_reset(&req);
    setpoint_buf_str(&req, "{\"level\":");
    setpoint_buf_quote(&req, level, strlen(level));
    setpoint_buf_str(&req, ",\"message\":");
    setpoint_buf_quote(&req, message, strlen(message));
    setpoint_buf_str(&req, "}");
    return setpoint_json_get(setpoint_call(setpoint_host_log, req.data, req.len), "error");
}
#endif /* SETPOINT_IMPLEMENTATION */
#endif /* SETPOINT_H */
