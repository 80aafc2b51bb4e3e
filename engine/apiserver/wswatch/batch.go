package wswatch

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// maxBatch is how many bytes a batch gathers before it is written out.
const maxBatch = 256 << 10

// batchConn lets the writer gather the frames of several queued events and
// hand them to the connection (TLS records, write system calls) in one write
// instead of one each: under fan-out most of a watch's CPU goes to those
// per-message writes. Outside a batch, writes go straight through, so that
// the handshake and the reader's control replies (pong, close) are never
// held back.
type batchConn struct {
	net.Conn

	mu       sync.Mutex // guards buf and batching; held across the underlying Write
	buf      []byte
	batching bool
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return c.Conn.Write(p)
	}
	if len(c.buf)+len(p) > maxBatch {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxBatch {
			return c.Conn.Write(p)
		}
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// begin starts gathering writes.
func (c *batchConn) begin() {
	c.mu.Lock()
	c.batching = true
	c.mu.Unlock()
}

// flush writes what was gathered and ends the batch.
func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batching = false
	return c.flushLocked()
}

func (c *batchConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = nil // an idle connection keeps no buffer
	if err != nil {
		return fmt.Errorf("wswatch: write: %w", err)
	}
	return nil
}

// hijacker hands the upgrader a batchConn instead of the raw connection.
type hijacker struct {
	http.ResponseWriter
	conn *batchConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &batchConn{Conn: c}
	return h.conn, rw, nil
}

func (h *hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }
