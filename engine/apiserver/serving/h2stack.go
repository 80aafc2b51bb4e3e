package serving

import (
	"net/http"
	"strings"
)

// growStackHTTP2 grows the stack of an HTTP/2 request's goroutine to what
// a request needs, in one step, before it goes through the serving layers.
//
// x/net's server runs each HTTP/2 request on a goroutine of its own, which
// starts with a small stack (the runtime's average goroutine stack, which
// a server's many idle goroutines keep at 2-4 KiB) and, on a create, grows
// it by doubling several times on the way through the serving layers, the
// router, decoding, validation and CEL, copying the frames in use each
// time: about 8% of the server's CPU in creates over HTTP/2. An HTTP/1.1
// request runs on its connection's goroutine, whose stack stays grown from
// one request to the next. One frame of stackReserve bytes, taken at the
// top, where there is little to copy, has the runtime grow the stack once
// to the size that holds it. Watches (a query with a watch parameter) are
// left out: they hold their goroutine for as long as they run, and an idle
// one needs little stack.
func growStackHTTP2(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor >= 2 && !watchQuery(r.URL.RawQuery) {
			_ = reserveStack()
		}
		next.ServeHTTP(w, r)
	})
}

// stackReserve is the frame reserveStack takes: the runtime then gives the
// goroutine a 16 KiB stack, which a create's deepest path fits in. It is
// the largest size the runtime keeps per-P caches of; a 32 KiB stack comes
// from the heap, zeroed, and costs more than the growth it would save.
const stackReserve = 8 << 10

// reserveStackIndex is always 0; reading buf at an index not known when
// compiling keeps the compiler from dropping reserveStack's frame.
var reserveStackIndex int

//go:noinline
func reserveStack() byte {
	var buf [stackReserve]byte
	return buf[reserveStackIndex%stackReserve]
}

// watchQuery reports whether the raw query has a watch parameter, whatever
// its value, without parsing the query into a map: a request that may be a
// watch keeps the small stack it starts with.
func watchQuery(raw string) bool {
	for raw != "" {
		var param string
		param, raw, _ = strings.Cut(raw, "&")
		if name, _, _ := strings.Cut(param, "="); name == "watch" {
			return true
		}
	}
	return false
}
