package wswatch

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxBatch is how many bytes of frames the writer gathers before it hands
// them to the connection.
const maxBatch = 256 << 10

// keptBatch is the largest batch buffer that goes back to the pool; larger
// ones (a burst of large objects) are left to the garbage collector.
const keptBatch = 512 << 10

// batchBufs holds the writers' batch buffers between flushes, so that an
// idle connection holds none and a busy one allocates none.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// frameConn is the hijacked connection. The writer frames the queued events
// itself (a server's text frames are not masked) and hands all of them to
// the connection in one write: one TLS record set and one write system call
// per flush instead of one per event, which is most of a watch's CPU under
// fan-out. gorilla keeps writing the control frames (ping, pong, close)
// through Write; mu makes each of those and each batch whole on the wire.
//
// Once a close frame has gone out, writeMessages fails: nothing may follow
// it on the wire.
type frameConn struct {
	net.Conn

	mu        sync.Mutex // held across each write to Conn; guards closeSent
	closeSent bool
}

// closeFrame is the first byte of a close frame (FIN, opcode 8); gorilla
// writes each control frame in one Write.
const closeFrame = 0x88

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) > 0 && p[0] == closeFrame {
		c.closeSent = true
	}
	return c.Conn.Write(p)
}

// writeMessages writes msgs as text frames, in order, gathering them into
// writes of about maxBatch bytes, each within timeout.
func (c *frameConn) writeMessages(msgs [][]byte, timeout time.Duration) error {
	bp := batchBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= keptBatch {
			*bp = buf[:0]
			batchBufs.Put(bp)
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeSent {
		return errCloseSent
	}
	if err := c.Conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("wswatch: write: %w", err)
	}
	for _, msg := range msgs {
		if len(buf) > 0 && len(buf)+len(msg) > maxBatch {
			if _, err := c.Conn.Write(buf); err != nil {
				return fmt.Errorf("wswatch: write: %w", err)
			}
			buf = buf[:0]
		}
		buf = appendFrame(buf, msg)
	}
	if _, err := c.Conn.Write(buf); err != nil {
		return fmt.Errorf("wswatch: write: %w", err)
	}
	return nil
}

// appendFrame appends msg as one unmasked, unfragmented text frame (RFC
// 6455 section 5.2).
func appendFrame(b, msg []byte) []byte {
	const finText = 0x81
	switch n := len(msg); {
	case n < 126:
		b = append(b, finText, byte(n))
	case n <= 0xffff:
		b = append(b, finText, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, finText, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, msg...)
}

// hijacker hands the upgrader a frameConn instead of the raw connection.
type hijacker struct {
	http.ResponseWriter
	conn *frameConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &frameConn{Conn: c}
	return h.conn, rw, nil
}

func (h *hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }
