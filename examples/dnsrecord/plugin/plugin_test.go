package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/examples/dnsrecord/fakedns"
	"github.com/setpoint-dev/setpoint/examples/dnsrecord/operator"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

const token = "wasm-test-token"

// secrets serves one Secret to the get host function.
type secrets struct{ secret []byte }

func (s secrets) GetObject(_ context.Context, _ string, req abi.GetRequest) ([]byte, bool, error) {
	if req.Kind == "Secret" && req.Namespace == "dns-system" && req.Name == "dns-credentials" {
		return s.secret, true, nil
	}
	return nil, false, nil
}

func (secrets) ListObjects(context.Context, string, abi.ListRequest) ([][]byte, error) {
	return nil, nil
}

// TestUnderHost runs the built module (bin/wasm/dnsrecord-plugin.wasm, built
// by `make plugins`) under the real host against the fake service on
// loopback: the egress grant lets its calls through, the Secret gives the
// token, and without the grant the call is refused, naming it.
func TestUnderHost(t *testing.T) {
	dns := fakedns.New(fakedns.Options{Token: token})
	srv := httptest.NewServer(dns)
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	secret, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "dns-credentials", "namespace": "dns-system"},
		"data":     map[string]string{"token": base64.StdEncoding.EncodeToString([]byte(token))},
	})
	h := hosttest.NewHost(t, host.Options{Objects: secrets{secret}})
	grant := &host.Egress{Allow: []host.EgressRule{{Scheme: "http", Host: "127.0.0.1", Port: port,
		Methods: []string{"GET", "POST", "PUT", "DELETE"}}}, Timeout: 5 * time.Second}
	p := hosttest.LoadWith(t, h, "dnsrecord-plugin", host.Config{Permissions: host.Permissions{Read: []string{"Secret"}}, Egress: grant})
	if !p.HasReconcile() || !p.HasFinalize() || p.HasAdmit() {
		t.Fatalf("exports: reconcile %v, finalize %v, admit %v", p.HasReconcile(), p.HasFinalize(), p.HasAdmit())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	config := map[string]string{
		operator.ConfigEndpoint:    srv.URL,
		operator.ConfigCredentials: "dns-system/dns-credentials",
	}
	obj := abi.RawJSON(`{"apiVersion":"example.setpoint.dev/v1","kind":"DNSRecord",` +
		`"metadata":{"name":"www","namespace":"default","uid":"u1","generation":1},` +
		`"spec":{"zone":"example.com","name":"www","type":"A","value":"192.0.2.10","ttl":300}}`)
	resp, err := p.Reconcile(ctx, &abi.ReconcileRequest{Object: obj, Config: config})
	if err != nil || resp.Error != "" {
		t.Fatalf("reconcile: %+v, %v", resp, err)
	}
	recs := dns.Records()
	if len(recs) != 1 || recs[0].Value != "192.0.2.10" || recs[0].Owner != "u1" {
		t.Fatalf("records = %+v", recs)
	}
	if id := resp.Status.String("externalID"); id != recs[0].ID || resp.RequeueAfter != operator.DefaultResyncPeriod {
		t.Errorf("status %s, requeue %v", resp.Status, resp.RequeueAfter)
	}

	withStatus := abi.RawJSON(strings.TrimSuffix(string(obj), "}") + `,"status":` + string(resp.Status) + `}`)
	fin, err := p.Finalize(ctx, &abi.FinalizeRequest{Object: withStatus, Config: config})
	if err != nil || !fin.Done || fin.Error != "" {
		t.Fatalf("finalize: %+v, %v", fin, err)
	}
	if recs := dns.Records(); len(recs) != 0 {
		t.Errorf("records after finalize = %+v", recs)
	}

	// Without the grant the host refuses the call, and the plugin says so.
	denied := hosttest.LoadWith(t, h, "dnsrecord-plugin", host.Config{Permissions: host.Permissions{Read: []string{"Secret"}}})
	resp, err = denied.Reconcile(ctx, &abi.ReconcileRequest{Object: obj, Config: config})
	if err != nil || resp.Error == "" || resp.Terminal || !strings.Contains(resp.Error, "egress") {
		t.Errorf("reconcile without the grant: %+v, %v; want a retryable error naming the egress grant", resp, err)
	}
	// Find and create, then find and delete; nothing without the grant.
	if st := dns.Stats(); st.Requests != 4 {
		t.Errorf("the service got %d requests, want 4", st.Requests)
	}
}
