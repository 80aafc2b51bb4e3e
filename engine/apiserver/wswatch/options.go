package wswatch

import (
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// Subprotocol is the plain JSON subprotocol the server selects by default.
const Subprotocol = "setpoint.watch.v1"

// CloseTooSlow is the close code sent to a client whose buffer filled; its
// reason tells the client to resume from its last resourceVersion.
const CloseTooSlow = 4008

// Close reasons (each under the 123 bytes a close frame allows).
const (
	reasonTooSlow   = "client too slow: resume the watch from the last resourceVersion received"
	reasonGoingAway = "server shutting down: resume the watch from the last resourceVersion received"
	reasonEnded     = "watch ended"
)

// Options configures a Server. Zero values get defaults in New.
type Options struct {
	// AllowedOrigins are origins (scheme://host[:port]) accepted besides the
	// server's own. "*" is refused.
	AllowedOrigins []string
	// Subprotocols the server may select, in order of preference; all carry
	// plain JSON text frames. [Subprotocol] by default.
	Subprotocols []string
	// Logger gets connection logs at debug level; slog.Default() when nil.
	Logger *slog.Logger
	// Encode turns an event into one message; EncodeEvent by default. The
	// REST handler passes its HTTP frame encoder so both streams match.
	Encode func(watch.Event) ([]byte, error)
	// MaxQueuedEvents and MaxQueuedBytes bound what one connection may have
	// encoded but not yet written: 1024 events and 4 MiB by default.
	MaxQueuedEvents int
	MaxQueuedBytes  int
	// PingInterval is how often the server pings; 30s by default.
	PingInterval time.Duration
	// PongTimeout is how long past PingInterval the client may stay silent
	// before it is dropped; 30s by default.
	PongTimeout time.Duration
	// WriteTimeout bounds each write (a message, a ping, the close frame);
	// 10s by default.
	WriteTimeout time.Duration
	// ReadLimit is the largest message the client may send; 4 KiB by default.
	ReadLimit int64
	// EncodeCacheSize is how many encoded events are kept for other
	// connections to reuse; 4096 by default.
	EncodeCacheSize int
	// EncodeCacheBytes bounds the bytes of the encoded events kept, per
	// format; 64 MiB by default. An event larger than that is not kept.
	EncodeCacheBytes int
	// WriteInterval is the least time between two writes of events to one
	// connection: events that arrive meanwhile go out together in the next
	// write, which costs far less CPU than one write each. 16ms (a frame at
	// 60 Hz: a browser shows changes no faster) by default.
	WriteInterval time.Duration
	// CloseGrace is how long the server waits for the client's close frame
	// after its own; 1s by default.
	CloseGrace time.Duration
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Encode == nil {
		o.Encode = EncodeEvent
	}
	if len(o.Subprotocols) == 0 {
		o.Subprotocols = []string{Subprotocol}
	}
	if o.MaxQueuedEvents <= 0 {
		o.MaxQueuedEvents = 1024
	}
	if o.MaxQueuedBytes <= 0 {
		o.MaxQueuedBytes = 4 << 20
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.PongTimeout <= 0 {
		o.PongTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 4 << 10
	}
	if o.EncodeCacheSize <= 0 {
		o.EncodeCacheSize = 4096
	}
	if o.EncodeCacheBytes <= 0 {
		o.EncodeCacheBytes = 64 << 20
	}
	if o.WriteInterval <= 0 {
		o.WriteInterval = 16 * time.Millisecond
	}
	if o.CloseGrace <= 0 {
		o.CloseGrace = time.Second
	}
}

func (o *Options) validate() error {
	for _, p := range o.Subprotocols {
		if isTokenProtocol(p) {
			return fmt.Errorf("wswatch: subprotocol %q carries credentials", tokenPrefix+"...")
		}
	}
	return nil
}
