package host

import (
	"sync"
	"time"
)

// minInitTimeout bounds the start of an instance (the guest runtime's
// initialization) from below, whatever the call timeout.
const minInitTimeout = 5 * time.Second

// tailBuffer keeps the last bytes a guest wrote to stdout and stderr, so a
// failure can say what the guest printed (a Go runtime's fatal error).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > tailSize {
		p = p[len(p)-tailSize:]
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
