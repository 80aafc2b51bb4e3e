package serving

import (
	"testing"
	"unsafe"
)

// useStack takes n frames of 1 KiB.
//
//go:noinline
func useStack(n int) byte {
	var buf [1 << 10]byte
	buf[n%len(buf)] = byte(n)
	if n <= 1 {
		return buf[reserveStackIndex%len(buf)]
	}
	return useStack(n-1) + buf[reserveStackIndex%len(buf)]
}

// stackMoves tells whether taking 8 KiB of stack in a new goroutine, after
// reserveStack when reserve is set, moves the goroutine's stack (the
// runtime grows a stack by copying it elsewhere).
func stackMoves(reserve bool) bool {
	moved := make(chan bool)
	go func() {
		var x byte
		if reserve {
			_ = reserveStack()
		}
		before := uintptr(unsafe.Pointer(&x))
		_ = useStack(8)
		moved <- uintptr(unsafe.Pointer(&x)) != before
	}()
	return <-moved
}

// After reserveStack, a goroutine's stack holds a request's depth without
// growing again; without it, the same depth grows it.
func TestReserveStack(t *testing.T) {
	if !stackMoves(false) {
		t.Fatal("8 KiB of frames did not grow a new goroutine's stack; the runtime starts goroutines with bigger stacks than this test expects")
	}
	if stackMoves(true) {
		t.Error("the stack grew after reserveStack: its frame did not reserve 16 KiB")
	}
}

func TestWatchQuery(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{"", false},
		{"watch=true", true},
		{"watch=1", true},
		{"watch", true},
		{"labelSelector=app%3Dx&watch=true&resourceVersion=5", true},
		{"labelSelector=app%3Dwatcher", false},
		{"fieldSelector=metadata.name%3Dwatch", false},
		{"allowWatchBookmarks=true", false},
		{"watchdog=1", false},
	} {
		if got := watchQuery(tc.raw); got != tc.want {
			t.Errorf("watchQuery(%q) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}
