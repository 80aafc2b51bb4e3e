// Package wswatch serves a watch stream over WebSocket (gorilla/websocket) for
// clients that cannot read a chunked HTTP stream comfortably: browsers first.
// The REST watch handler calls Server.Open (or Server.Serve) when a
// `?watch=true` request is a WebSocket upgrade; the handler keeps parsing the
// request and starting the watch, wswatch owns the connection. It imports nothing of Setpoint's: it
// consumes a k8s.io/apimachinery watch.Interface.
//
// # Protocol
//
// Each server message is one text frame holding one JSON meta/v1 WatchEvent,
// exactly the shape of one frame of the HTTP stream:
//
//	{"type":"ADDED","object":{...}}
//
// with type ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (whose object is a
// meta/v1 Status; code 410 means the requested resourceVersion is gone: list
// again and watch from the list's resourceVersion). Bookmarks are sent as on
// HTTP: periodically when the request has allowWatchBookmarks=true (the
// browser client always asks for them, so that it can resume from a recent
// resourceVersion even when nothing it selects changes). An error in starting
// the watch (a compacted resourceVersion, a bad selector) is sent the same
// way, as one ERROR event, because a browser cannot read the HTTP status of a
// failed handshake. Messages from the client are read and ignored.
//
// # Converted objects
//
// A connection may convert its events before they are encoded
// (Server.ServeConverted with a Conversion): the REST handler converts them as
// it does on the HTTP stream, so that a WebSocket watch whose request asks for
// `application/json;as=Table;g=meta.k8s.io;v=v1` gets, for every event
// (bookmarks included), a Table of one row with the kind's printer columns,
// its column definitions in the first event only and the row object as
// includeObject asks; one that asks for
// `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` gets each
// object's metadata alone. ERROR events keep their Status; an event that cannot
// be converted ends the watch with an ERROR event that says why. A browser
// cannot set an Accept header on a WebSocket, and Kubernetes has no query
// parameter for it (kubernetes/kubernetes#83961), so the REST handler takes
// the `accept` query parameter of a WebSocket watch, when it has one, in place
// of the Accept header: `?watch=true&accept=application%2Fjson%3Bas%3DTable%3Bg%3Dmeta.k8s.io%3Bv%3Dv1`.
//
// # Authentication and subprotocols
//
// A browser cannot set an Authorization header on a WebSocket, so the bearer
// token may travel as the subprotocol
// `base64url.bearer.authorization.k8s.io.<base64url token>`. The serving
// layer validates it and strips it from the request before this package runs;
// this package never selects, echoes or logs it either. The server selects the
// first subprotocol of Options.Subprotocols the client offered
// (`setpoint.watch.v1` by default: plain JSON text frames), or none. A
// browser that offers the token subprotocol must offer `setpoint.watch.v1`
// too, because a browser fails a connection whose server selects none of the
// subprotocols it offered.
//
// # Origin
//
// A request with an Origin header is accepted when the origin is the server's
// own (same scheme, host and port as the request) or one of
// Options.AllowedOrigins; New refuses "*" and anything that is not a plain
// scheme://host[:port]. Other origins get 403 before the upgrade. Requests
// without an Origin header (non-browser clients) are accepted.
//
// # Close codes
//
//	1000 normal       the watch ended: timeoutSeconds passed, or after an
//	                  ERROR event (act on the event first)
//	1001 going away   the server is shutting down: reconnect with backoff and
//	                  resume from the last resourceVersion received
//	4008 too slow     CloseTooSlow: the client did not read fast enough and
//	                  its per-connection buffer (Options.MaxQueuedEvents,
//	                  MaxQueuedBytes) filled; the events still queued were
//	                  dropped. Resume from the last resourceVersion received;
//	                  nothing after it was lost.
//
// A connection that answers no ping within PingInterval+PongTimeout, or whose
// writes stall for WriteTimeout, is closed without a close frame (the client
// sees 1006); it too should resume from its last resourceVersion.
//
// # Goroutines
//
// Open upgrades the connection and starts the watch in the caller's
// goroutine (the request's), then starts the connection's reader goroutine
// and returns, so that the request's handler can return too: the HTTP
// server then lets go of the request's goroutine, with the stack the handler
// chain grew, and of its buffers, which would otherwise stay with every idle
// connection. The reader reads the client's control frames (pongs, close)
// until the session ends, on a stack of its own that stays small. The
// REST handler opens its watches so, when the serving layers let the
// request outlive its handler; Serve, which blocks until the session ends,
// is Open and a wait.
//
// Events reach the connection's bounded queue (a mutex-guarded slice, empty
// and unallocated while idle) in one of two ways: a watch with a Deliver
// method (the engine's) calls the session's deliver function from its own
// goroutine, which encodes the event and queues it without blocking; any
// other watch gets a pump goroutine that reads the result channel and does
// the same. A push into a queue that has no writer starts the writer
// goroutine, which writes until it finds the queue empty and exits; a timer
// sends the pings, and the close frame is written by whichever part ends
// the session (the writer after the last event or on overflow, the
// shutdown). An idle connection therefore holds one goroutine (its reader)
// besides its watch's. The reader stops what the session started and waits
// for it before the session's done function runs.
//
// # Cost under fan-out
//
// Every watcher of a kind gets the same events, so the Server keeps the last
// encoded events (at most Options.EncodeCacheSize of them and
// Options.EncodeCacheBytes of bytes) and encodes each one once for all
// connections (and for the REST handler's plain HTTP watches, through
// Server.EncodeShared), finding it by object pointer when the watches share decoded
// objects (the engine's do); Options.Encode must therefore give the same
// bytes for the same event. Converted events are kept apart, in a cache per
// Conversion.Format (PartialObjectMetadata, say), so that a connection never
// gets the bytes of a format it did not ask for; a Conversion without a
// Format (the REST handler's Tables, whose first event alone carries the
// column definitions) is converted and encoded for its connection alone.
// Connections that convert nothing use the shared cache alone and pay
// nothing for conversions. The writer frames the queued events itself and
// hands all of them to the connection in one write (one run of TLS records,
// one system call), and after a write it lets Options.WriteInterval pass
// before the next, so that under a steady stream each write carries several
// events while an event after a quiet spell goes out at once.
package wswatch
