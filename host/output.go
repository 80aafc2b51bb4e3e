package host

import (
	"sync"
	"time"
)

// minInitTimeout bounds the start of an instance (the guest runtime's
// initialization) from below, whatever the call timeout.
const minInitTimeout = 5 * time.Second

// tailBuffer keeps the first and the last bytes a guest wrote to stdout and
// stderr, so a failure can say what the guest printed: a Go runtime's fatal
// error comes first, its goroutine dump last.
type tailBuffer struct {
	mu   sync.Mutex
	head []byte
	buf  []byte
	cut  bool // bytes were dropped between head and buf
}

const (
	headSize = 1024
	tailSize = 4096
)

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := headSize - len(t.head); room > 0 {
		take := min(room, len(p))
		t.head = append(t.head, p[:take]...)
		p = p[take:]
	}
	if len(p) > tailSize {
		p = p[len(p)-tailSize:]
		t.cut = true
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.head, t.buf, t.cut = t.head[:0], t.buf[:0], false
	t.mu.Unlock()
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return string(t.head) + "\n...\n" + string(t.buf)
	}
	return string(t.head) + string(t.buf)
}
