package serving

import (
	"container/list"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Defaults of ConnOptions.
const (
	// DefaultMaxConnectionsPerAddress bounds the connections of one client
	// address. HTTP/2 clients (kubectl, client-go) multiplex every request
	// over one connection, so even many clients behind one address need far
	// fewer.
	DefaultMaxConnectionsPerAddress = 1024
	// DefaultMaxConnectionsCeiling caps the default total, which is
	// otherwise three quarters of the open-file limit.
	DefaultMaxConnectionsCeiling = 16384
	// DefaultHandshakeTimeout bounds the TLS handshake and the reading of
	// a request's headers; Go's http.Server takes the handshake's deadline
	// from its ReadHeaderTimeout.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 2 * time.Minute
)

// ConnOptions bounds the connections a server holds. Zero values get the
// defaults above.
type ConnOptions struct {
	// MaxConnections bounds the open connections; by default three
	// quarters of the process's open-file limit, at most
	// DefaultMaxConnectionsCeiling, so that connections cannot take every
	// file descriptor the store needs.
	MaxConnections int
	// MaxConnectionsPerAddress bounds the open connections of one client
	// IP address.
	MaxConnectionsPerAddress int
	// Logger gets a debug record for each connection refused or closed to
	// make room; slog.Default() when nil.
	Logger *slog.Logger
}

func (o *ConnOptions) setDefaults() {
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnectionsCeiling
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur > 0 {
			o.MaxConnections = int(min(lim.Cur/4*3, DefaultMaxConnectionsCeiling))
		}
		o.MaxConnections = max(o.MaxConnections, 1)
	}
	if o.MaxConnectionsPerAddress <= 0 {
		o.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// ConnListener is a listener that bounds its open connections, in total and
// per client address. When a bound is reached, it makes room by closing the
// oldest connection (of that address, for the per-address bound) that has
// not yet carried an authenticated request, the new one included; only when
// every other connection in the way has authenticated is the new one
// refused. So clients without a token cannot lock out those with one by
// holding connections open (MarkAuthenticated tells it which carried one;
// the server's ConnContext must be ConnContext).
type ConnListener struct {
	net.Listener
	opts ConnOptions

	mu     sync.Mutex // guards the fields below
	total  int
	byAddr map[string]int
	unauth *list.List // of *trackedConn not yet authenticated, oldest first
}

// LimitConnections wraps ln.
func LimitConnections(ln net.Listener, opts ConnOptions) *ConnListener {
	opts.setDefaults()
	return &ConnListener{Listener: ln, opts: opts, byAddr: map[string]int{}, unauth: list.New()}
}

// Open returns the number of connections open.
func (l *ConnListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Accept returns the next connection the bounds let in.
func (l *ConnListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// admit registers c, closing older unauthenticated connections to make
// room, or closes c and returns nil.
func (l *ConnListener) admit(c net.Conn) *trackedConn {
	addr := hostOf(c.RemoteAddr())
	var victims []*trackedConn
	l.mu.Lock()
	if l.byAddr[addr] >= l.opts.MaxConnectionsPerAddress {
		if v := l.oldestUnauthLocked(addr); v != nil {
			l.dropLocked(v)
			victims = append(victims, v)
		}
	}
	if l.byAddr[addr] < l.opts.MaxConnectionsPerAddress && l.total >= l.opts.MaxConnections {
		if v := l.oldestUnauthLocked(""); v != nil {
			l.dropLocked(v)
			victims = append(victims, v)
		}
	}
	admitted := l.byAddr[addr] < l.opts.MaxConnectionsPerAddress && l.total < l.opts.MaxConnections
	var tc *trackedConn
	if admitted {
		tc = &trackedConn{Conn: c, l: l, addr: addr}
		l.total++
		l.byAddr[addr]++
		tc.elem = l.unauth.PushBack(tc)
	}
	l.mu.Unlock()
	for _, v := range victims {
		l.opts.Logger.Debug("closed an unauthenticated connection to make room", "remote", v.RemoteAddr().String())
		_ = v.Conn.Close()
	}
	if !admitted {
		l.opts.Logger.Debug("refused a connection: too many open", "remote", c.RemoteAddr().String())
		_ = c.Close()
	}
	return tc
}

// oldestUnauthLocked returns the oldest unauthenticated connection, of addr
// when it is not "". The caller holds l.mu.
func (l *ConnListener) oldestUnauthLocked(addr string) *trackedConn {
	for e := l.unauth.Front(); e != nil; e = e.Next() {
		if tc := e.Value.(*trackedConn); addr == "" || tc.addr == addr {
			return tc
		}
	}
	return nil
}

// dropLocked stops counting tc. The caller holds l.mu.
func (l *ConnListener) dropLocked(tc *trackedConn) {
	if tc.dropped {
		return
	}
	tc.dropped = true
	l.total--
	if l.byAddr[tc.addr]--; l.byAddr[tc.addr] <= 0 {
		delete(l.byAddr, tc.addr)
	}
	if tc.elem != nil {
		l.unauth.Remove(tc.elem)
		tc.elem = nil
	}
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// trackedConn is a connection a ConnListener counts.
type trackedConn struct {
	net.Conn
	l    *ConnListener
	addr string

	// Guarded by l.mu.
	dropped bool
	elem    *list.Element // in l.unauth while not authenticated
}

func (tc *trackedConn) Close() error {
	tc.l.mu.Lock()
	tc.l.dropLocked(tc)
	tc.l.mu.Unlock()
	return tc.Conn.Close()
}

// authenticated marks tc as having carried an authenticated request.
func (tc *trackedConn) authenticated() {
	tc.l.mu.Lock()
	defer tc.l.mu.Unlock()
	if tc.elem != nil {
		tc.l.unauth.Remove(tc.elem)
		tc.elem = nil
	}
}

type connKey struct{}

// ConnContext is what http.Server.ConnContext must be for a ConnListener to
// learn which connections authenticated: it puts the connection in the
// context of its requests.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// MarkAuthenticated records that the request's connection carried an
// authenticated request, which spares it when a ConnListener makes room.
func MarkAuthenticated(ctx context.Context) {
	if tc, ok := ctx.Value(connKey{}).(*trackedConn); ok {
		tc.authenticated()
	}
}
