package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestCreateRacingNamespaceDeletion creates ConfigMaps from several
// clients while their namespace is deleted. A create that read the
// namespace as active and committed after the namespace's content was
// emptied left its object behind in a namespace that was then finalized
// and removed: the client had its 201, the object outlived its namespace
// (until a full garbage-collection sweep, minutes later), and a namespace
// created again under that name would have held it. Once the namespace is
// gone, nothing may be left in it; every create is answered 201 (and
// removed with the namespace), 403 (terminating) or 404 (gone).
func TestCreateRacingNamespaceDeletion(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	do := func(method, path, body string) (int, []byte) {
		var code int
		var b []byte
		var err error
		if body != "" {
			code, b, err = s.Do(method, path, s.Token, strings.NewReader(body))
		} else {
			code, b, err = s.Do(method, path, s.Token, nil)
		}
		if err != nil {
			t.Error(err)
		}
		return code, b
	}
	const rounds, clients = 6, 6
	for round := range rounds {
		ns := fmt.Sprintf("race-%d", round)
		if code, b := do("POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`); code != 201 {
			t.Fatalf("create namespace: %d %s", code, b)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		codes := make([]map[int]int, clients)
		for c := range clients {
			wg.Add(1)
			codes[c] = map[int]int{}
			go func() {
				defer wg.Done()
				for i := 0; i < 300; i++ {
					select {
					case <-stop:
						return
					default:
					}
					code, _ := do("POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Sprintf(`{"metadata":{"name":"c%d-%d"}}`, c, i))
					codes[c][code]++
				}
			}()
		}
		time.Sleep(200 * time.Millisecond)
		if code, b := do("DELETE", "/api/v1/namespaces/"+ns, ""); code != 200 {
			t.Fatalf("delete namespace: %d %s", code, b)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, b := do("GET", "/api/v1/namespaces/"+ns, "")
			if code == 404 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespace %s not gone: %d %.300s", ns, code, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		for c := range clients {
			for code := range codes[c] {
				if code != 201 && code != 403 && code != 404 {
					t.Errorf("a create was answered %d", code)
				}
			}
		}
		code, b := do("GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3D"+ns, "")
		var l struct {
			Items []struct {
				Metadata struct{ Name, ResourceVersion string }
			}
		}
		if err := json.Unmarshal(b, &l); code != 200 || err != nil {
			t.Fatalf("list: %d %.300s", code, b)
		}
		if len(l.Items) > 0 {
			t.Fatalf("round %d: namespace %s is gone but holds %d ConfigMaps: %+v", round, ns, len(l.Items), l.Items)
		}
	}
}
