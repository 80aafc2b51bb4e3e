package host

import (
	"context"
	"sync"
	"testing"
)

// HoldInstance takes an instance of p out of its pool, as a call in
// progress does, until the returned func puts it back.
func HoldInstance(t testing.TB, p *Plugin) (release func()) {
	t.Helper()
	in, err := p.pool.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sync.OnceFunc(func() { p.pool.put(in, false) })
}
