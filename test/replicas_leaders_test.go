package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store/etcd/etcdtest"
	"github.com/setpoint-dev/setpoint/test/testserver"
	"github.com/setpoint-dev/setpoint/test/testsupport"
)

// TestReplicasModuleGCAndFinalizerLeaders: with three replicas, the
// garbage collector of modules and the finalization of deleted Plugins each
// run on the replica that holds their Lease, and only there: an unused
// module is deleted, and a deleted Plugin's finalizer removed, by that
// replica alone (its log says so, the others' do not), while every replica
// unloads the Plugin. Once the holder is killed, another replica takes each
// Lease over and does the same work.
func TestReplicasModuleGCAndFinalizerLeaders(t *testing.T) {
	wasm := builtModule(t, "widget-as")
	e := etcdtest.Start(t, etcdtest.Options{})
	rs := testserver.StartReplicas(t, testserver.ReplicasOptions{Endpoints: []string{e.Endpoint}, Prefix: "/leaders",
		Args: []string{"--module-gc-grace", "1s"}})
	rcs := newReplicaClients(rs)
	byID := map[string]*replicaClient{}
	for _, r := range rcs {
		byID[replicaIdentity(t, r.s)] = r
	}
	alive := func(r *replicaClient) bool { return r.s.Pid() != 0 }
	holder := func(lease string, not *replicaClient) *replicaClient {
		t.Helper()
		var h *replicaClient
		testsupport.Poll(t, 15*time.Second, "a live replica holds "+lease, func() (bool, string) {
			for _, r := range rcs {
				if !alive(r) {
					continue
				}
				id, err := leaseHolder(r.s, lease)
				if err != nil {
					return false, err.Error()
				}
				h = byID[id]
				return h != nil && h != not && alive(h), "holder " + id
			}
			return false, "no replica alive"
		})
		return h
	}
	// only checks that the log of want, and of no other replica, has line.
	// The line is written after the change it reports, which the test may
	// see first: want's log is waited for.
	only := func(what string, want *replicaClient, line string) {
		t.Helper()
		testsupport.Poll(t, 10*time.Second, what+": the line in "+want.name+"'s log", func() (bool, string) {
			return strings.Contains(want.s.Logs(), line), "not yet"
		})
		for _, r := range rcs {
			has := strings.Contains(r.s.Logs(), line)
			if has != (r == want) {
				t.Errorf("%s: replica %s's log has %q: %v, want %v (the lease holder is %s)", what, r.name, line, has, r == want, want.name)
			}
		}
	}
	// through picks a live replica other than not to send requests
	// through, or not itself when it is the only one left: when the two
	// leases were held by different replicas, both are killed and the
	// survivor leads both.
	through := func(not *replicaClient) *replicaClient {
		for _, r := range rcs {
			if r != not && alive(r) {
				return r
			}
		}
		if alive(not) {
			return not
		}
		t.Fatal("no live replica")
		return nil
	}

	round := 0
	work := func(gcLeader, finLeader *replicaClient) {
		t.Helper()
		round++
		// An unused module, uploaded through another replica, is deleted
		// by the module GC's leader.
		unused := mustUpload(t, through(gcLeader).s, withCustomSection(wasm, fmt.Sprintf("unused-%d", round)))
		testsupport.Poll(t, 20*time.Second, "the unused module deleted", func() (bool, string) {
			code, _, err := through(gcLeader).s.Do("GET", modulesPath+"/"+unused, through(gcLeader).s.Token, nil)
			return err == nil && code == http.StatusNotFound, fmt.Sprintf("%d %v", code, err)
		})
		only("the module GC", gcLeader, `msg="module deleted" component=plugins digest=`+unused)

		// A Plugin deleted through another replica is unloaded on each
		// and finalized by the finalization's leader.
		name := fmt.Sprintf("fin-%d", round)
		via := through(finLeader)
		via.must(t, "POST", pluginsPath, map[string]any{"apiVersion": "setpoint.dev/v1alpha1", "kind": "Plugin",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"module": map[string]any{"digest": mustUpload(t, via.s, wasm)}}})
		loaded := `msg="plugin loaded" component=plugins plugin=` + name + " "
		for _, r := range rcs {
			if alive(r) {
				testsupport.Poll(t, 30*time.Second, name+" loaded on "+r.name, func() (bool, string) {
					return strings.Contains(r.s.Logs(), loaded), "not in its log"
				})
			}
		}
		via.must(t, "DELETE", pluginsPath+"/"+name, nil)
		testsupport.Poll(t, 20*time.Second, name+" deleted", func() (bool, string) {
			code, out := via.do("GET", pluginsPath+"/"+name, via.s.Token, nil)
			return code == http.StatusNotFound, fmt.Sprintf("%d %s", code, out)
		})
		for _, r := range rcs {
			if alive(r) {
				testsupport.Poll(t, 10*time.Second, name+" unloaded on "+r.name, func() (bool, string) {
					return strings.Contains(r.s.Logs(), `msg="plugin unloaded" component=plugins plugin=`+name+"\n"), "not in its log"
				})
			}
		}
		only("the Plugins' finalization", finLeader, `msg="plugin finalized" component=plugins plugin=`+name+"\n")
	}

	gcLeader, finLeader := holder("setpoint-module-gc", nil), holder("setpoint-plugin-finalizer", nil)
	work(gcLeader, finLeader)

	gcLeader.s.Kill()
	if finLeader != gcLeader {
		finLeader.s.Kill()
	}
	killed := time.Now()
	newGC, newFin := holder("setpoint-module-gc", gcLeader), holder("setpoint-plugin-finalizer", finLeader)
	t.Logf("after the kill, %s leads the module GC and %s the Plugins' finalization (%.1fs)", newGC.name, newFin.name, time.Since(killed).Seconds())
	work(newGC, newFin)
}
