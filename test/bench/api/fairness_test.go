package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/test/bench/benchtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
)

// fairMode is one server configuration BenchmarkFairness measures.
type fairMode struct {
	name string
	args []string
	// elsewhere has A flood a second server of its own (same flags, its
	// own data directory) while B uses the first.
	elsewhere bool
}

// fairResult is what one mode measured: user B's GETs and creates alone
// and under user A's flood, and A's creates during the flood.
type fairResult struct {
	mode                    fairMode
	idleGet, floodGet       phase
	idleCreate, floodCreate phase
	bRejected               int // 429s B's creates got under the flood
	bGaveUp                 int // B's creates that got 429 eleven times
	aCreated, aRejected     int
	aRate                   float64
	aAloneRate              float64 // A's creates/s with B idle
}

// fairAloneWindow is how long A's creates are counted alone in each round.
const fairAloneWindow = 2 * time.Second

// fairRounds is how many segments of B's GETs alone and under the flood
// BenchmarkFairness alternates.
const fairRounds = 5

// BenchmarkFairness measures how far one user flooding the server with
// creates slows another user's requests (`make bench-api` runs it with
// the others; alone: go test -run '^$' -bench Fairness -benchtime 1x -v
// ./test/bench/api). For each configuration below, on a fresh server with
// two users from a static token file (--token-auth-file), user B:
//
//   - GETs one Widget at a time, FAIR_GETS of them (10,000), in segments
//     alone and while user A creates 1 KiB Widgets as fast as 64
//     connections (FLOOD_CONNECTIONS) allow, in turn (fairRounds of each,
//     so that what else the machine runs weighs on both alike): the p50
//     and p99, and the p99 under the flood over the p99 alone (goal < 3x);
//   - creates Widgets one at a time, FAIR_CREATES of them (100), alone and
//     then for at most 15 seconds under the flood: B's writes share the
//     write seats with A's, which is where fair queuing works.
//
// A runs in a process of its own (TestFairFlood), so that its client work
// does not delay B's requests in this process's scheduler; its creates per
// second are counted alone (fairAloneWindow each round, B idle for longer
// than the fair share counts it active: a lone user's create throughput at
// 64 connections) and over B's segments under the flood. Both clients
// honour 429's Retry-After as client-go does (B retries the same create up
// to 10 times; the latency counts the waits). The configurations: the
// defaults (fair share of 8 seats per core on); the fair share off
// (--fair-share-seats -1); a fair share of 4 seats per core; the share
// and queuing (--max-queued-requests-per-user -1) off; and FAIR_SEATS (16)
// write seats, fewer than A's connections, the share off, with queuing on
// and off, where A's flood takes every write seat; and a control, the
// flood elsewhere: A floods a second server process with the defaults
// while B uses the first, which A does not touch, so that B's p99 ratio
// there is what sharing the machine's cores alone costs, a floor no
// fairness in B's server can beat. FAIR_MODES, a list of their names
// separated by semicolons, runs those in that order.
func BenchmarkFairness(b *testing.B) {
	flooders := benchtest.Env("FLOOD_CONNECTIONS", 64)
	gets := benchtest.Env("FAIR_GETS", 10000)
	creates := benchtest.Env("FAIR_CREATES", 100)
	seats := strconv.Itoa(benchtest.Env("FAIR_SEATS", 16))
	off := []string{"--max-queued-requests-per-user", "-1"}
	shareOff := []string{"--fair-share-seats", "-1"}
	share4 := strconv.Itoa(4 * runtime.GOMAXPROCS(0))
	modes := []fairMode{
		{name: "defaults"},
		{name: "fair share off", args: shareOff},
		{name: "fair share " + share4 + " seats", args: []string{"--fair-share-seats", share4}},
		{name: "share off, queuing off", args: append(slices.Clone(shareOff), off...)},
		{name: seats + " write seats, share off", args: append([]string{"--max-mutating-requests-inflight", seats}, shareOff...)},
		{name: seats + " w. seats, share, queue off", args: append([]string{"--max-mutating-requests-inflight", seats}, append(slices.Clone(shareOff), off...)...)},
		{name: "flood elsewhere", elsewhere: true},
	}
	if only := os.Getenv("FAIR_MODES"); only != "" {
		var picked []fairMode
		for _, name := range strings.Split(only, ";") {
			i := slices.IndexFunc(modes, func(m fairMode) bool { return m.name == name })
			if i < 0 {
				b.Fatalf("FAIR_MODES: no configuration %q", name)
			}
			picked = append(picked, modes[i])
		}
		modes = picked
	}
	for range b.N {
		var results []fairResult
		for _, m := range modes {
			results = append(results, fairRun(b, m, flooders, gets, creates))
		}
		b.Logf("B's GETs and creates alone and while A floods creates from %d connections (GOMAXPROCS %d, load average %s):",
			flooders, runtime.GOMAXPROCS(0), benchtest.LoadAvg())
		b.Logf("%-28s | %-33s | %-40s | %s", "server", "B GET p50 / p99 alone -> flood", "B create p50 / p99 alone -> flood (429s; done, gave up of all)", "A creates/s alone -> with B's GETs (429s)")
		for _, r := range results {
			ratio := float64(r.floodGet.quantile(0.99)) / float64(r.idleGet.quantile(0.99))
			b.Logf("%-28s | %s / %s -> %s / %s = %.2fx | %s / %s -> %s / %s (%d; %d, %d of %d) | %.0f -> %.0f (%d)",
				r.mode.name,
				ms(r.idleGet.quantile(0.5)), ms(r.idleGet.quantile(0.99)), ms(r.floodGet.quantile(0.5)), ms(r.floodGet.quantile(0.99)), ratio,
				ms(r.idleCreate.quantile(0.5)), ms(r.idleCreate.quantile(0.99)), ms(r.floodCreate.quantile(0.5)), ms(r.floodCreate.quantile(0.99)),
				r.bRejected, r.floodCreate.ops, r.bGaveUp, creates, r.aAloneRate, r.aRate, r.aRejected)
		}
		r := results[0]
		b.ReportMetric(float64(r.floodGet.quantile(0.99))/float64(r.idleGet.quantile(0.99)), "get-p99-ratio")
		b.ReportMetric(r.aRate, "flood-creates/s")
	}
}

// fairUser is one identity's client, which honours Retry-After.
type fairUser struct {
	*apiClient
	rejected atomic.Int64
}

// send makes one request and reads the whole response; on 429 it returns
// how long Retry-After asks to wait.
func (u *fairUser) send(ctx context.Context, method, path string, body []byte) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := u.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, 0, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		u.rejected.Add(1)
		s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || s < 1 {
			s = 1
		}
		return resp.StatusCode, time.Duration(s) * time.Second, nil
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, 0, fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, buf.Bytes())
	}
	return resp.StatusCode, 0, nil
}

// errGaveUp is a create that got 429 eleven times.
var errGaveUp = errors.New("429 eleven times")

// create creates one Widget, waiting and retrying on 429 as client-go
// does, at most 10 times.
func (u *fairUser) create(ctx context.Context, ns, name string) error {
	for range 11 {
		code, wait, err := u.send(ctx, "POST", widgets(ns), widget(name, objectSize))
		if err != nil || code != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return errGaveUp
}

// fairGroup is the group of the fairness benchmark's users.
const fairGroup = "setpoint:bench-fairness"

// bindFairGroup binds fairGroup to cluster-admin on admin's server and
// waits until RBAC lets a user of it (token) list Widgets.
func bindFairGroup(b *testing.B, admin *apiClient, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"bench-fairness"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},
"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":%q}]}`, fairGroup)
	if _, err := admin.expect(ctx, http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", []byte(body)); err != nil {
		b.Fatal(err)
	}
	u := *admin
	u.token = token
	for {
		code, _, err := u.do(ctx, "GET", widgets("default"), nil)
		if err == nil && code == http.StatusOK {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%s may not list Widgets: %v %d", fairGroup, err, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fairRun measures one mode on a server of its own.
func fairRun(b *testing.B, m fairMode, flooders, gets, creates int) fairResult {
	tokens := map[string]string{"flood": randomToken(b), "bob": randomToken(b)}
	file := filepath.Join(b.TempDir(), "tokens.csv")
	var csv bytes.Buffer
	for _, name := range []string{"flood", "bob"} {
		// Not system:masters, whose requests the limits exempt: a group
		// bound to cluster-admin (bindFairGroup).
		fmt.Fprintf(&csv, "%s,%s,uid-%s,%q\n", tokens[name], name, name, fairGroup)
	}
	if err := os.WriteFile(file, csv.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	opts := testserver.Options{LogLevel: "warn", Args: append([]string{"--token-auth-file", file}, m.args...)}
	s := testserver.Start(b, opts)
	admin := newAPIClient(s, 2)
	defer admin.http.CloseIdleConnections()
	registerWidget(b, admin)
	createNamespace(b, admin, "fair")
	bindFairGroup(b, admin, tokens["bob"])
	floodServer := s
	if m.elsewhere {
		floodServer = testserver.Start(b, opts)
		other := newAPIClient(floodServer, 2)
		defer other.http.CloseIdleConnections()
		registerWidget(b, other)
		createNamespace(b, other, "flood")
		bindFairGroup(b, other, tokens["flood"])
	} else {
		createNamespace(b, admin, "flood")
	}
	const objects = 100
	timeout := 5 * time.Minute
	if p := admin.creates(2, 0, objects, "fair", timeout); p.err != nil {
		b.Fatalf("creates: %v", p.err)
	}
	user := func(name string, conns int) *fairUser {
		c := newAPIClient(s, conns)
		c.token = tokens[name]
		b.Cleanup(c.http.CloseIdleConnections)
		return &fairUser{apiClient: c}
	}
	bob := user("bob", 1)
	r := fairResult{mode: m}
	// bCreates creates Widgets one at a time for at most budget; the
	// latency of those created, and how many gave up.
	bCreates := func(prefix string, budget time.Duration) (phase, int) {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		var p phase
		gaveUp := 0
		start := time.Now()
		for i := range creates {
			t0 := time.Now()
			err := bob.create(ctx, "fair", fmt.Sprintf("%s%05d", prefix, i))
			if errors.Is(err, errGaveUp) {
				gaveUp++
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					p.err = err
				}
				break
			}
			p.lat = append(p.lat, time.Since(t0))
		}
		p.elapsed, p.ops = time.Since(start), len(p.lat)
		slices.Sort(p.lat)
		return p, gaveUp
	}

	// B alone, after a warm-up.
	if p := bob.gets(1, gets/4, objects, "fair", timeout); p.err != nil {
		b.Fatalf("warm-up GETs: %v", p.err)
	}
	if p, _ := bCreates("warm", timeout); p.err != nil {
		b.Fatalf("warm-up creates: %v", p.err)
	}
	b.Logf("%s: load average %s", m.name, benchtest.LoadAvg())

	// B's GETs in segments, alone and under A's flood in turn, so that
	// what else the machine runs weighs on both alike.
	fl := startFlood(b, floodServer, tokens["flood"], flooders)
	var window, aloneWindow time.Duration
	aAlone := 0
	for round := range fairRounds {
		idle := bob.gets(1, gets/fairRounds, objects, "fair", timeout)
		if idle.err != nil {
			b.Fatalf("GETs alone: %v", idle.err)
		}
		if round == 0 {
			r.idleCreate, _ = bCreates("idle", timeout)
		}
		// A alone, B idle for longer than the fair share counts it active.
		al0, _ := fl.resume()
		t0 := time.Now()
		time.Sleep(fairAloneWindow)
		a0, r0 := fl.counts()
		aloneWindow += time.Since(t0)
		aAlone += a0 - al0
		t0 = time.Now()
		flooded := bob.gets(1, gets/fairRounds, objects, "fair", timeout)
		window += time.Since(t0)
		a1, r1 := fl.pause()
		if flooded.err != nil {
			b.Fatalf("GETs under the flood: %v", flooded.err)
		}
		r.idleGet.lat = append(r.idleGet.lat, idle.lat...)
		r.floodGet.lat = append(r.floodGet.lat, flooded.lat...)
		r.aCreated += a1 - a0
		r.aRejected += r1 - r0
	}
	slices.Sort(r.idleGet.lat)
	slices.Sort(r.floodGet.lat)
	r.aRate = float64(r.aCreated) / window.Seconds()
	r.aAloneRate = float64(aAlone) / aloneWindow.Seconds()
	if r.idleCreate.err != nil {
		b.Fatalf("creates alone: %v", r.idleCreate.err)
	}
	fl.resume()
	b0 := bob.rejected.Load()
	r.floodCreate, r.bGaveUp = bCreates("flood", 15*time.Second)
	r.bRejected = int(bob.rejected.Load() - b0)
	fl.stop()
	if r.floodCreate.err != nil {
		b.Fatalf("creates under the flood: %v", r.floodCreate.err)
	}
	b.Logf("%s: done (load average %s)", m.name, benchtest.LoadAvg())
	return r
}

// flood is user A's process, TestFairFlood.
type flood struct {
	b    *testing.B
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	done bool
}

// startFlood runs TestFairFlood in a process of its own, so that the
// client work of its connections does not delay B's requests in this
// process's scheduler. It floods from the first resume. With
// FAIR_FLOOD_CPUS set, it runs under taskset -c FAIR_FLOOD_CPUS (with
// go test -exec 'taskset -c 0' for this process and the servers, that
// keeps A's client off B's and the servers' cores).
func startFlood(b *testing.B, s *testserver.Server, token string, conns int) *flood {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFairFlood$", "-test.count", "1")
	if cpus := os.Getenv("FAIR_FLOOD_CPUS"); cpus != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpus}, cmd.Args...)...)
	}
	cmd.Env = append(os.Environ(),
		"FAIR_FLOOD_KUBECONFIG="+s.Kubeconfig, "FAIR_FLOOD_TOKEN="+token, "FAIR_FLOOD_CONNECTIONS="+strconv.Itoa(conns))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &flood{b: b, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(f.stop)
	return f
}

// resume starts the flood and returns once it has run for two seconds,
// with how many creates it has made, and how many got 429, so far.
func (f *flood) resume() (created, rejected int) { return f.tell("resume") }

// counts returns the flood's counts so far, going on.
func (f *flood) counts() (created, rejected int) { return f.tell("counts") }

// pause stops the flood and returns once none of its requests is left,
// with its counts.
func (f *flood) pause() (created, rejected int) { return f.tell("pause") }

func (f *flood) tell(what string) (created, rejected int) {
	f.b.Helper()
	if _, err := io.WriteString(f.in, what+"\n"); err != nil {
		f.b.Fatalf("flood: %v", err)
	}
	for f.out.Scan() {
		if _, err := fmt.Sscanf(f.out.Text(), "counts %d %d", &created, &rejected); err == nil {
			return created, rejected
		}
	}
	f.b.Fatalf("flood ended: %v", f.out.Err())
	return 0, 0
}

// stop ends the flood and waits for its process.
func (f *flood) stop() {
	if f.done {
		return
	}
	f.done = true
	_ = f.in.Close()
	if err := f.cmd.Wait(); err != nil {
		f.b.Errorf("flood: %v", err)
	}
}

// TestFairFlood is BenchmarkFairness's user A: it creates Widgets in the
// namespace flood from FAIR_FLOOD_CONNECTIONS connections as fast as the
// server takes them (waiting out 429s' Retry-After as client-go does).
// It reads commands on stdin: "resume" starts the flood and answers after
// two seconds of it, "pause" stops it and answers once no request is left,
// both with "counts CREATED REJECTED"; it ends when stdin closes. It does
// nothing unless BenchmarkFairness runs it.
func TestFairFlood(t *testing.T) {
	kubeconfig := os.Getenv("FAIR_FLOOD_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("BenchmarkFairness runs it")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.TLSClientConfig.CAData)
	conns := benchtest.MustEnv(t, "FAIR_FLOOD_CONNECTIONS", 64)
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: 2 * conns,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	u := &fairUser{apiClient: &apiClient{url: cfg.Host, token: os.Getenv("FAIR_FLOOD_TOKEN"), http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		running = sync.NewCond(&mu)
		on      bool
		busy    int // workers in a request or its Retry-After
	)
	var next, created atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				mu.Lock()
				for !on && ctx.Err() == nil {
					running.Wait()
				}
				if ctx.Err() != nil {
					mu.Unlock()
					return
				}
				busy++
				mu.Unlock()
				code, wait, err := u.send(ctx, "POST", widgets("flood"), widget(fmt.Sprintf("a%08d", next.Add(1)), objectSize))
				switch {
				case ctx.Err() != nil:
				case err != nil:
					t.Errorf("flood: %v", err)
				case code == http.StatusTooManyRequests:
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				default:
					created.Add(1)
				}
				mu.Lock()
				busy--
				running.Broadcast()
				mu.Unlock()
			}
		})
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "counts" {
			fmt.Printf("counts %d %d\n", created.Load(), u.rejected.Load())
			continue
		}
		mu.Lock()
		on = sc.Text() == "resume"
		running.Broadcast()
		if on {
			mu.Unlock()
			time.Sleep(2 * time.Second) // the flood reaches its pace
		} else {
			for busy > 0 {
				running.Wait()
			}
			mu.Unlock()
		}
		fmt.Printf("counts %d %d\n", created.Load(), u.rejected.Load())
	}
	mu.Lock()
	cancel()
	running.Broadcast()
	mu.Unlock()
	wg.Wait()
}

func randomToken(b *testing.B) string {
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(buf)
}
