package badger_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// The crash test re-runs this test binary as a child that writes until it is
// killed. The child is selected by these environment variables.
const (
	crashDirEnv   = "SETPOINT_CRASH_CHILD_DIR"
	crashCycleEnv = "SETPOINT_CRASH_CHILD_CYCLE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(uncleanDirEnv); dir != "" {
		uncleanChild(dir)
	}
	if dir := os.Getenv(uncleanLargeDirEnv); dir != "" {
		uncleanLargeChild(dir)
	}
	if dir := os.Getenv(crashDirEnv); dir != "" {
		cycle, _ := strconv.Atoi(os.Getenv(crashCycleEnv))
		if err := crashChild(dir, cycle); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	code := m.Run()
	if benchReadDir != "" {
		os.RemoveAll(benchReadDir)
	}
	os.Exit(code)
}

func crashOptions() badger.Options {
	return badger.Options{
		MemTableSize:       8 << 20, // rotates memtables every few thousand writes
		BlockCacheSize:     4 << 20,
		CompactionInterval: -1,
		ValueLogGCInterval: -1,
	}
}

func hashOf(v []byte) string { s := sha256.Sum256(v); return hex.EncodeToString(s[:8]) }

// crashChild opens the store, prints "start <rev>", then runs 64 writers (one
// on odd cycles, so that groups of one write, which the store commits as a
// Badger transaction, are killed too, not only the larger groups of a
// KVLoader) that create, update (with compare-and-swap) and delete their own
// keys, printing "ack <rev> <key> <hash>" for each acknowledged write ("-" as
// hash for a delete), and compacts older cycles now and then, until it is
// killed. Each line is one write(2) of less than PIPE_BUF bytes, so the
// parent never reads half a line.
func crashChild(dir string, cycle int) error {
	db, err := badger.Open(dir, crashOptions())
	if err != nil {
		return err
	}
	ctx := context.Background()
	rev, err := db.CurrentRevision(ctx)
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	emit := func(line string) error {
		outMu.Lock()
		defer outMu.Unlock()
		_, err := os.Stdout.WriteString(line)
		return err
	}
	if err := emit(fmt.Sprintf("start %d\n", rev)); err != nil {
		return err
	}
	writers := 64
	if cycle%2 == 1 {
		writers = 1
	}
	errc := make(chan error, writers+1)
	for w := range writers {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(cycle), uint64(w)))
			type live struct {
				key string
				rev int64
			}
			var mine []live
			for n := 0; ; n++ {
				val := fmt.Appendf(nil, `{"cycle":%d,"writer":%d,"n":%d,"pad":"%s"}`,
					cycle, w, n, strings.Repeat("x", 900+rng.IntN(200)))
				var line string
				switch op := rng.IntN(10); {
				case len(mine) == 0 || op < 4:
					k := store.ObjectKey("crash.setpoint.dev", "items", "c", fmt.Sprintf("c%d-w%d-%d", cycle, w, n))
					r, err := db.Create(ctx, k, val)
					if err != nil {
						errc <- fmt.Errorf("create %s: %w", k, err)
						return
					}
					mine = append(mine, live{k, r})
					line = fmt.Sprintf("ack %d %s %s\n", r, k, hashOf(val))
				case op < 9:
					i := rng.IntN(len(mine))
					r, err := db.Update(ctx, mine[i].key, val, mine[i].rev)
					if err != nil {
						errc <- fmt.Errorf("update %s at %d: %w", mine[i].key, mine[i].rev, err)
						return
					}
					mine[i].rev = r
					line = fmt.Sprintf("ack %d %s %s\n", r, mine[i].key, hashOf(val))
				default:
					i := rng.IntN(len(mine))
					_, r, err := db.Delete(ctx, mine[i].key, mine[i].rev)
					if err != nil {
						errc <- fmt.Errorf("delete %s at %d: %w", mine[i].key, mine[i].rev, err)
						return
					}
					line = fmt.Sprintf("ack %d %s -\n", r, mine[i].key)
					mine = append(mine[:i], mine[i+1:]...)
				}
				if err := emit(line); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	go func() {
		for {
			time.Sleep(20 * time.Millisecond)
			// Keep the last 3,000 revisions, and all of this cycle: the
			// parent replays the cycle's history from its start.
			cur, err := db.CurrentRevision(ctx)
			if target := min(cur-3000, rev); err == nil && target > 0 {
				err = db.Compact(ctx, target)
			}
			if err != nil {
				errc <- fmt.Errorf("compact: %w", err)
				return
			}
		}
	}()
	return <-errc
}

type ack struct {
	rev  int64
	key  string
	hash string // "-" for a delete
}

// TestCrash kills a writing child process at random moments and checks after
// each kill that every acknowledged write survived with its content and its
// revision, and that revisions never go back or get reused.
// SETPOINT_CRASH_CYCLES sets the number of cycles (default 20).
func TestCrash(t *testing.T) {
	cycles := 20
	if s := os.Getenv("SETPOINT_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("SETPOINT_CRASH_CYCLES=%q", s)
		}
		cycles = n
	}
	if testing.Short() {
		cycles = 3
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	last := int64(1) // the revision the store reopened at after the previous cycle
	total := 0
	for cycle := range cycles {
		acks, start := runCrashChild(t, exe, dir, cycle, rng)
		if start >= 0 && start != last {
			t.Fatalf("cycle %d: child opened at revision %d, the store was at %d", cycle, start, last)
		}
		last = verifyCrash(t, dir, cycle, acks, last)
		total += len(acks)
	}
	t.Logf("%d cycles, %d acknowledged writes verified, final revision %d", cycles, total, last)
}

// runCrashChild starts a child, kills it at a random moment and returns its
// acknowledged writes and the revision it opened at (-1 if killed before).
func runCrashChild(t *testing.T, exe, dir string, cycle int, rng *rand.Rand) ([]ack, int64) {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashCycleEnv+"="+strconv.Itoa(cycle))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Mostly kill while writing; sometimes while opening.
	var delay time.Duration
	killEarly := rng.IntN(8) == 0
	if killEarly {
		delay = time.Duration(rng.IntN(40)) * time.Millisecond
	} else {
		delay = time.Duration(30+rng.IntN(300)) * time.Millisecond
	}
	lines := make(chan string, 1024)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		readErr <- sc.Err()
	}()
	var acks []ack
	start := int64(-1)
	var timer <-chan time.Time
	if killEarly {
		timer = time.After(delay)
	}
	parse := func(l string) {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "start":
			start, _ = strconv.ParseInt(f[1], 10, 64)
			if timer == nil {
				timer = time.After(delay)
			}
		case len(f) == 4 && f[0] == "ack":
			r, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("cycle %d: bad line %q", cycle, l)
			}
			acks = append(acks, ack{r, f[2], f[3]})
		default:
			t.Fatalf("cycle %d: bad line %q", cycle, l)
		}
	}
	killed := false
	for !killed {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("cycle %d: child exited before the kill: %s", cycle, stderr.String())
			}
			parse(l)
		case <-timer:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	// What the child wrote before it died is still in the pipe.
	for l := range lines {
		parse(l)
	}
	if err := <-readErr; err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("cycle %d: reading child: %v", cycle, err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("cycle %d: child ended with %v, not by the kill: %s", cycle, err, stderr.String())
	}
	return acks, start
}

// verifyCrash reopens the store and checks the cycle's acknowledged writes.
// It returns the revision the store reopened at.
func verifyCrash(t *testing.T, dir string, cycle int, acks []ack, before int64) int64 {
	t.Helper()
	ctx := context.Background()
	db, err := badger.Open(dir, crashOptions())
	if err != nil {
		t.Fatalf("cycle %d: reopen: %v", cycle, err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", cycle, err)
		}
	}()
	cur, err := db.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur < before {
		t.Fatalf("cycle %d: revision went back from %d to %d", cycle, before, cur)
	}
	if len(acks) == 0 {
		return cur
	}
	byRev := map[int64]ack{}
	lastOfKey := map[string]ack{}
	minRev := acks[0].rev
	for _, a := range acks {
		if a.rev <= before {
			t.Fatalf("cycle %d: revision %d acknowledged again (store was at %d)", cycle, a.rev, before)
		}
		if _, dup := byRev[a.rev]; dup {
			t.Fatalf("cycle %d: revision %d acknowledged twice", cycle, a.rev)
		}
		if a.rev > cur {
			t.Fatalf("cycle %d: acknowledged revision %d lost; store reopened at %d", cycle, a.rev, cur)
		}
		byRev[a.rev] = a
		minRev = min(minRev, a.rev)
		if l, ok := lastOfKey[a.key]; !ok || a.rev > l.rev {
			lastOfKey[a.key] = a
		}
	}
	// History holds every acknowledged write at its revision, in order.
	w, err := db.Watch(ctx, "", max(before, minRev-1))
	if err != nil {
		t.Fatalf("cycle %d: watch: %v", cycle, err)
	}
	defer w.Stop()
	seen := 0
	lastEvent := map[string]store.Event{}
	for next := max(before, minRev-1) + 1; next <= cur; next++ {
		ev, ok := <-w.Events()
		if !ok {
			t.Fatalf("cycle %d: history ended before %d: %v", cycle, next, w.Err())
		}
		if ev.Revision() != next {
			t.Fatalf("cycle %d: history has %d where %d was due", cycle, ev.Revision(), next)
		}
		lastEvent[ev.Object.Key] = ev
		a, ok := byRev[next]
		if !ok {
			continue // committed, but the child died before acknowledging it
		}
		seen++
		h := "-"
		if ev.Type != store.Deleted {
			h = hashOf(ev.Object.Value)
		}
		if ev.Object.Key != a.key || h != a.hash {
			t.Fatalf("cycle %d: revision %d holds %s (%s), acknowledged %s (%s)", cycle, next, ev.Object.Key, h, a.key, a.hash)
		}
	}
	if seen != len(acks) {
		t.Fatalf("cycle %d: history shows %d of %d acknowledged writes", cycle, seen, len(acks))
	}
	// Every key the child wrote is in the state its last event in history says
	// (a write may follow the last acknowledged one, committed but not acked).
	for k := range lastOfKey {
		ev := lastEvent[k]
		kv, err := db.Get(ctx, k, store.GetOptions{})
		if ev.Type == store.Deleted {
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("cycle %d: %s deleted at %d is back: %v %+v", cycle, k, ev.Revision(), err, kv)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cycle %d: %s written at %d: %v", cycle, k, ev.Revision(), err)
		}
		if kv.ModRevision != ev.Revision() || !bytes.Equal(kv.Value, ev.Object.Value) {
			t.Fatalf("cycle %d: %s at %d, history says %d", cycle, k, kv.ModRevision, ev.Revision())
		}
	}
	return cur
}

// A process killed right after Badger created its next value log, before the
// file got its header, leaves an empty .vlog file; the store still opens,
// with everything it had.
func TestOpenAfterCrashLeftAnEmptyValueLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := badger.Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	rev, err := db.Create(ctx, "/a", []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(vlogs)
	if len(vlogs) == 0 {
		t.Fatal("no value log after a write")
	}
	var last int
	fmt.Sscanf(filepath.Base(vlogs[len(vlogs)-1]), "%06d.vlog", &last)
	empty := filepath.Join(dir, fmt.Sprintf("%06d.vlog", last+1))
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = badger.Open(dir, testOptions())
	if err != nil {
		t.Fatalf("open with an empty value log: %v", err)
	}
	defer db.Close()
	kv, err := db.Get(ctx, "/a", store.GetOptions{})
	if err != nil || string(kv.Value) != `{"v":1}` || kv.ModRevision != rev {
		t.Fatalf("after reopening: %+v, %v; want /a at revision %d", kv, err, rev)
	}
	if _, err := db.Create(ctx, "/b", []byte(`{"v":2}`)); err != nil {
		t.Fatalf("write after reopening: %v", err)
	}
}
