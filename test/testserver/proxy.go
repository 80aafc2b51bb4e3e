package testserver

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a loopback TCP forwarder for failure tests: it accepts
// connections on Addr and joins each to its current target, or to each of
// its targets in turn (a balancer). The test moves the target (a load
// balancer that fails over), or cuts every connection and refuses new ones
// (a partition), and heals it again.
type Proxy struct {
	// Addr is the host:port it listens on.
	Addr string

	ln net.Listener
	wg sync.WaitGroup // the accept loop and the copies

	mu      sync.Mutex // guards the fields below
	targets []string   // joined in turn
	next    int        // the index in targets of the next connection's
	cut     bool
	conns   map[net.Conn]struct{} // both ends of each joined connection
}

// StartProxy listens on a free loopback port and forwards to target until
// the end of t.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return StartBalancer(t, []string{target})
}

// StartBalancer listens on a free loopback port and forwards each new
// connection to the next of targets in turn, until the end of t.
func StartBalancer(t testing.TB, targets []string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, targets: targets, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// SetTarget sends new connections to target; open ones stay where they are.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets, p.next = []string{target}, 0
}

// Cut closes every open connection and, until Heal, every new one at once.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.dropLocked()
}

// Drop closes every open connection; new ones are joined as before.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked()
}

// Heal lets new connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		cut, target := p.cut, p.targets[p.next%len(p.targets)]
		p.next++
		p.mu.Unlock()
		if cut {
			_ = in.Close()
			continue
		}
		p.wg.Go(func() { p.join(in, target) })
	}
}

// join copies between in and a new connection to target until either ends.
func (p *Proxy) join(in net.Conn, target string) {
	out, err := net.Dial("tcp", target)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_, _ = in.Close(), out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends at a cut, or at either peer's close
		_, _ = in.Close(), out.Close()
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}
