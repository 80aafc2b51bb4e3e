package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// createLease creates the Lease default/name through s, bounded by timeout.
func createLease(s *testserver.Server, c *http.Client, name string, timeout time.Duration) (int, string, error) {
	body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":"test"}}`, name)
	code, b, err := s.DoWith("POST", strings.TrimSuffix(leasesPath, "/"), s.Token, strings.NewReader(body), testserver.DoOptions{Client: c, Timeout: timeout})
	if code == 0 {
		return 0, "", err
	}
	return code, string(b), err
}

// TestEtcdMemberLoss runs a server on a 3-member etcd cluster with a short
// --request-timeout. Killing the etcd leader: creates in flight may fail
// with 503, and after a short settling time every create succeeds and a
// watch through the API sees every stored Lease once. Stopping a second
// member (no quorum): a create answers 503 with the store's message within
// the request timeout and the server keeps running. Starting both members
// again: creates succeed again.
func TestEtcdMemberLoss(t *testing.T) {
	const (
		requestTimeout = 3 * time.Second
		settle         = 3 * time.Second
	)
	e := etcdtest.StartCluster(t, 3, etcdtest.Options{})
	s := testserver.Start(t, testserver.Options{LogLevel: "warn", Args: []string{
		"--store", "etcd", "--etcd-servers", strings.Join(e.Endpoints, ","), "--etcd-prefix", "/loss",
		"--request-timeout", requestTimeout.String()}})
	c := s.HTTPClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := s.Watch(ctx, leasesPath)
	if err != nil {
		t.Fatal(err)
	}

	// One member lost: the leader, killed while creates run.
	leader := e.Leader(t)
	var created, failed []string
	var unavailable time.Duration // from the kill to the last failed create's answer
	var killed time.Time
	var slowest time.Duration // the longest create sent after the kill
	after := 0
	for i := 0; ; i++ {
		if killed.IsZero() && i == 20 {
			e.Members[leader].Stop()
			killed = time.Now()
		}
		if !killed.IsZero() && time.Since(killed) > settle+2*time.Second {
			break
		}
		name := fmt.Sprintf("ha-%04d", i)
		sent := time.Now()
		code, body, err := createLease(s, c, name, requestTimeout+5*time.Second)
		if !killed.IsZero() {
			slowest = max(slowest, time.Since(sent))
		}
		if err == nil && code == http.StatusCreated {
			created = append(created, name)
			if !killed.IsZero() && sent.Sub(killed) > settle {
				after++
			}
			continue
		}
		failed = append(failed, name)
		if !killed.IsZero() {
			unavailable = time.Since(killed)
		}
		t.Logf("create %s: %d %v %s", name, code, err, body)
		if err != nil || code != http.StatusServiceUnavailable {
			t.Errorf("create %s: %d %v %s, want 503", name, code, err, body)
		}
		if !killed.IsZero() && sent.Sub(killed) > settle {
			t.Errorf("create %s sent %v after the kill failed", name, sent.Sub(killed))
		}
	}
	t.Logf("etcd leader killed: %d creates, %d failed (503), the last answered %.2fs after the kill; the slowest create after the kill took %.2fs",
		len(created)+len(failed), len(failed), unavailable.Seconds(), slowest.Seconds())
	if after < 5 {
		t.Errorf("%d creates succeeded after the settling time, want at least 5", after)
	}
	// A failed create may have been stored (its answer was lost): the
	// watch must match what the server lists.
	code, body, err := s.Do("GET", leasesPath, s.Token, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("list leases: %d %v %s", code, err, body)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, it := range list.Items {
		if strings.HasPrefix(it.Metadata.Name, "ha-") {
			stored[it.Metadata.Name] = true
		}
	}
	for _, n := range created {
		if !stored[n] {
			t.Errorf("Lease %s was created but is not listed", n)
		}
	}
	testsupport.Poll(t, 10*time.Second, "the watch sees every stored Lease", func() (bool, string) {
		for n := range stored {
			if watch.Added(n) == 0 {
				return false, n + " not seen"
			}
		}
		return true, ""
	})
	if err := watch.Err(); err != nil {
		t.Errorf("watch: %v", err)
	}
	for n, k := range watch.AddedAll() {
		if strings.HasPrefix(n, "ha-") && (k != 1 || !stored[n]) {
			t.Errorf("Lease %s added %d times by the watch, listed: %v", n, k, stored[n])
		}
	}

	// A majority lost: a second member stopped.
	second := (leader + 1) % 3
	e.Members[second].Stop()
	sent := time.Now()
	code, body2, err := createLease(s, c, "ha-noquorum", requestTimeout+10*time.Second)
	took := time.Since(sent)
	t.Logf("no quorum: create answered %d in %.2fs: %s", code, took.Seconds(), body2)
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body2, "store is unavailable") {
		t.Errorf("create without quorum: %d %v %s, want 503 saying the store is unavailable", code, err, body2)
	}
	if took > requestTimeout+time.Second {
		t.Errorf("create without quorum answered after %v, over the request timeout %v", took, requestTimeout)
	}
	sent = time.Now()
	code, body3, err := s.Do("GET", leasesPath+"ha-0000", s.Token, nil)
	took = time.Since(sent)
	t.Logf("no quorum: get answered %d in %.2fs", code, took.Seconds())
	if err != nil || code != http.StatusServiceUnavailable || took > requestTimeout+time.Second {
		t.Errorf("get without quorum: %d %v %s after %v, want 503 within the request timeout", code, err, body3, took)
	}
	if err := s.Wait(100 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("the server exited without quorum: %v", err)
	}

	// Both members back: creates succeed again.
	for _, m := range []int{second, leader} {
		if err := e.Members[m].Restart(30 * time.Second); err != nil {
			t.Fatalf("restart etcd member %d: %v", m, err)
		}
	}
	back := time.Now()
	n := 0
	testsupport.Poll(t, 15*time.Second, "creates succeed once etcd is back", func() (bool, string) {
		n++
		code, body, err := createLease(s, c, fmt.Sprintf("ha-back-%d", n), requestTimeout+time.Second)
		return err == nil && code == http.StatusCreated, fmt.Sprintf("%d %v %s", code, err, body)
	})
	t.Logf("etcd back: creates succeed %.2fs after both members answer healthy", time.Since(back).Seconds())
	for i := range 5 {
		if code, body, err := createLease(s, c, fmt.Sprintf("ha-after-%d", i), requestTimeout+time.Second); err != nil || code != http.StatusCreated {
			t.Errorf("create after recovery: %d %v %s", code, err, body)
		}
	}
}
