package serving

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
)

// testFrame is a frame for ringScheduler's tests: data bytes on a stream
// whose flow-control window is *win (nil: a frame that is not DATA).
type testFrame struct {
	name    string
	stream  uint32
	size    int32
	win     *int32
	control bool // RST_STREAM: a stream ID, yet a control frame
}

func (f testFrame) StreamID() uint32 { return f.stream }

// Consume splits as x/net's FrameWriteRequest.Consume does, with a maximum
// frame size of 4 bytes.
func (f testFrame) Consume(n int32) (testFrame, testFrame, int) {
	if f.win == nil || f.size == 0 {
		return f, testFrame{}, 1
	}
	allowed := min(n, *f.win, 4)
	if allowed <= 0 {
		return testFrame{}, testFrame{}, 0
	}
	if f.size > allowed {
		*f.win -= allowed
		head, rest := f, f
		head.size, rest.size = allowed, f.size-allowed
		return head, rest, 2
	}
	*f.win -= f.size
	return f, testFrame{}, 1
}

func newTestScheduler() *ringScheduler[testFrame] {
	return newRingScheduler(func(f testFrame) bool { return f.control })
}

// popAll pops until the scheduler has nothing writable.
func popAll(rs *ringScheduler[testFrame]) []string {
	var got []string
	for {
		f, ok := rs.pop()
		if !ok {
			return got
		}
		got = append(got, f.name)
	}
}

func unlimited() *int32 { w := int32(1 << 30); return &w }

func TestRingSchedulerOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames func(streams map[uint32]*int32) []testFrame
		want   []string
	}{{
		name: "control frames first, in order",
		frames: func(w map[uint32]*int32) []testFrame {
			return []testFrame{
				{name: "d1", stream: 1, size: 1, win: w[1]},
				{name: "settings"},
				{name: "d3", stream: 3, size: 1, win: w[3]},
				{name: "rst3", stream: 3, control: true},
				{name: "ping"},
			}
		},
		want: []string{"settings", "rst3", "ping", "d1", "d3"},
	}, {
		name: "streams take turns, each in order",
		frames: func(w map[uint32]*int32) []testFrame {
			var fs []testFrame
			for i := range 4 {
				fs = append(fs, testFrame{name: fmt.Sprint("a", i), stream: 1, size: 1, win: w[1]})
			}
			fs = append(fs,
				testFrame{name: "b0", stream: 3, size: 1, win: w[3]},
				testFrame{name: "c0", stream: 5, size: 1, win: w[5]},
				testFrame{name: "b1", stream: 3, size: 1, win: w[3]})
			return fs
		},
		want: []string{"a0", "b0", "c0", "a1", "b1", "a2", "a3"},
	}, {
		name: "a frame larger than the frame size is split in place",
		frames: func(w map[uint32]*int32) []testFrame {
			return []testFrame{
				{name: "big", stream: 1, size: 10, win: w[1]},
				{name: "after", stream: 1, size: 1, win: w[1]},
				{name: "other", stream: 3, size: 1, win: w[3]},
			}
		},
		want: []string{"big", "other", "big", "big", "after"},
	}, {
		name: "frames of a stream that is not open go with the control frames",
		frames: func(w map[uint32]*int32) []testFrame {
			return []testFrame{
				{name: "d1", stream: 1, size: 1, win: w[1]},
				{name: "headers7", stream: 7},
			}
		},
		want: []string{"headers7", "d1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newTestScheduler()
			wins := map[uint32]*int32{}
			for _, id := range []uint32{1, 3, 5} {
				rs.open(id)
				wins[id] = unlimited()
			}
			for _, f := range tc.frames(wins) {
				rs.push(f)
			}
			if diff := cmp.Diff(tc.want, popAll(rs)); diff != "" {
				t.Errorf("pop order (-want +got):\n%s", diff)
			}
		})
	}
}

// A stream out of window leaves the rotation without holding up the
// others, and is written as soon as its window opens: at once when nothing
// else is writable, within a round of the others when they are busy.
func TestRingSchedulerBlockedStream(t *testing.T) {
	rs := newTestScheduler()
	for _, id := range []uint32{1, 3, 5} {
		rs.open(id)
	}
	var shut int32
	w3, w5 := unlimited(), unlimited()
	rs.push(testFrame{name: "s1", stream: 1, size: 2, win: &shut})
	rs.push(testFrame{name: "s1b", stream: 1, size: 2, win: &shut})
	for i := range 3 {
		rs.push(testFrame{name: fmt.Sprint("a", i), stream: 3, size: 1, win: w3})
	}
	if diff := cmp.Diff([]string{"a0", "a1", "a2"}, popAll(rs)); diff != "" {
		t.Fatalf("with stream 1 out of window (-want +got):\n%s", diff)
	}
	if rs.blocked.n != 1 || rs.ready.n != 0 {
		t.Fatalf("blocked %d, ready %d streams; want 1 and 0", rs.blocked.n, rs.ready.n)
	}
	// The window opens with nothing else to write.
	shut = 2
	if diff := cmp.Diff([]string{"s1"}, popAll(rs)); diff != "" {
		t.Fatalf("after the window opened (-want +got):\n%s", diff)
	}
	// The window opens while two other streams are busy.
	for i := range 6 {
		rs.push(testFrame{name: fmt.Sprint("b", i), stream: 3, size: 1, win: w3})
		rs.push(testFrame{name: fmt.Sprint("c", i), stream: 5, size: 1, win: w5})
	}
	if f, _ := rs.pop(); f.name != "b0" {
		t.Fatalf("first pop %q, want b0", f.name)
	}
	shut = 2
	got := popAll(rs)
	if i := indexOf(got, "s1b"); i < 0 || i > 2 {
		t.Errorf("stream 1 written at pop %d of %v after its window opened; want within a round of the 2 busy streams", i, got)
	}
	if len(got) != 12 {
		t.Errorf("popped %d frames, want 12: %v", len(got), got)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A closed stream's frames are dropped, wherever it was, and its queue is
// reused; frames that come for it later go with the control frames.
func TestRingSchedulerCloseStream(t *testing.T) {
	rs := newTestScheduler()
	var shut int32
	for _, id := range []uint32{1, 3, 5} {
		rs.open(id)
	}
	w := unlimited()
	rs.push(testFrame{name: "ready1", stream: 1, size: 1, win: w})
	rs.push(testFrame{name: "blocked3", stream: 3, size: 1, win: &shut})
	rs.push(testFrame{name: "ready5", stream: 5, size: 1, win: w})
	if f, _ := rs.pop(); f.name != "ready1" {
		t.Fatalf("first pop %q, want ready1", f.name)
	}
	rs.push(testFrame{name: "again1", stream: 1, size: 1, win: w})
	if f, _ := rs.pop(); f.name != "ready5" { // stream 3 is found blocked on the way
		t.Fatalf("second pop %q, want ready5", f.name)
	}
	rs.close(1)
	rs.close(3)
	rs.close(3) // twice: no effect
	if rs.ready.n != 0 || rs.blocked.n != 0 || len(rs.streams) != 1 || len(rs.pool) != 2 {
		t.Fatalf("after closing: ready %d, blocked %d, open %d, pooled %d; want 0, 0, 1, 2",
			rs.ready.n, rs.blocked.n, len(rs.streams), len(rs.pool))
	}
	rs.push(testFrame{name: "rst1", stream: 1})
	if diff := cmp.Diff([]string{"rst1"}, popAll(rs)); diff != "" {
		t.Fatalf("after closing (-want +got):\n%s", diff)
	}
	rs.open(7)
	rs.push(testFrame{name: "new7", stream: 7, size: 1, win: w})
	if diff := cmp.Diff([]string{"new7"}, popAll(rs)); diff != "" {
		t.Fatalf("a stream on a reused queue (-want +got):\n%s", diff)
	}
}

// Random pushes, pops, window changes and closes: each frame of a stream
// still open is written once, in its stream's order, and all of them once
// every window is open.
func TestRingSchedulerRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		rs := newTestScheduler()
		const streams = 8
		wins := make([]int32, streams)
		next := make([]int, streams) // next frame number to push, per stream
		want := make([]int, streams) // next frame number expected out
		open := make([]bool, streams)
		split := map[string]int32{} // bytes of a frame still to come
		for op := range 300 {
			s := rng.IntN(streams)
			id := uint32(2*s + 1)
			switch r := rng.IntN(10); {
			case r < 4:
				if !open[s] {
					rs.open(id)
					open[s] = true
				}
				name := fmt.Sprintf("%d/%d", s, next[s])
				size := int32(1 + rng.IntN(9))
				split[name] = size
				rs.push(testFrame{name: name, stream: id, size: size, win: &wins[s]})
				next[s]++
			case r < 6:
				wins[s] += int32(rng.IntN(8))
			case r < 7 && open[s]:
				rs.close(id)
				open[s] = false
				want[s] = next[s] // its frames are gone
			default:
				f, ok := rs.pop()
				if !ok {
					continue
				}
				fs := int(f.stream-1) / 2
				if !open[fs] {
					t.Fatalf("round %d op %d: frame %s of a closed stream", round, op, f.name)
				}
				if exp := fmt.Sprintf("%d/%d", fs, want[fs]); f.name != exp {
					t.Fatalf("round %d op %d: popped %s, want %s", round, op, f.name, exp)
				}
				if split[f.name] -= f.size; split[f.name] == 0 {
					want[fs]++
				}
			}
		}
		for s := range wins {
			wins[s] = 1 << 20
		}
		for _, name := range popAll(rs) {
			var s, n int
			fmt.Sscanf(name, "%d/%d", &s, &n)
			if n < want[s] {
				t.Fatalf("round %d: %s written after %d/%d", round, name, s, want[s])
			}
			want[s] = n
		}
		if rs.ready.n != 0 || rs.blocked.n != 0 {
			t.Fatalf("round %d: ready %d, blocked %d after draining", round, rs.ready.n, rs.blocked.n)
		}
	}
}

// The HTTP/2 adapter finds FrameWriteRequest's stream, which tells
// RST_STREAM from a stream's own frames.
func TestStreamFieldFound(t *testing.T) {
	if frameStreamField == nil {
		t.Fatal("http2.FrameWriteRequest has no stream pointer field: RST_STREAM would queue behind its stream's DATA")
	}
	if !controlFrame(http2.FrameWriteRequest{}) {
		t.Error("a frame of no stream is not a control frame")
	}
}

func TestFIFOReusesItsArray(t *testing.T) {
	var f fifo[int]
	for i := range 1000 {
		f.push(i)
		f.push(i)
		if got := f.shift(); got != i {
			t.Fatalf("shift %d, want %d", got, i)
		}
		if got := f.shift(); got != i {
			t.Fatalf("shift %d, want %d", got, i)
		}
	}
	for i := range 100 { // never drains: moves down instead of growing
		f.push(i)
		f.push(i + 1)
		f.shift()
	}
	if c := cap(f.s); c > 256 {
		t.Errorf("capacity %d after 100 items left in a queue", c)
	}
}
