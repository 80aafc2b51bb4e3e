package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/auth/serviceaccount"
	"github.com/setpoint-dev/setpoint/store/badger"
)

// issued is what the token handler asked to sign.
type issued struct {
	namespace, name, uid string
	audiences            []string
	lifetime             time.Duration
}

func TestTokenRequest(t *testing.T) {
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := engine.New(context.Background(), engine.Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last issued
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h, err := NewTokenRequestHandler(TokenRequestOptions{
		Engine: eng, Audiences: []string{"https://kubernetes.default.svc"}, MaxLifetime: 48 * time.Hour,
		Now: func() time.Time { return now },
		Issue: func(_ context.Context, req serviceaccount.Request) (string, time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			last = issued{req.Namespace, req.Name, req.UID, req.Audiences, req.Lifetime}
			return "signed", now.Add(req.Lifetime), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Options{Engine: eng, Routes: []Route{{Pattern: TokenRequestPattern, Handler: h}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	ts := &testServer{Server: hs, api: api, eng: eng, db: db}
	b := ts.mustDo(t, http.StatusCreated, request{method: http.MethodPost, path: "/api/v1/namespaces/default/serviceaccounts",
		body: `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"robot"}}`})
	var sa struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	if err := json.Unmarshal(b, &sa); err != nil || sa.Metadata.UID == "" {
		t.Fatalf("created ServiceAccount %s: %v", b, err)
	}
	const path = "/api/v1/namespaces/default/serviceaccounts/robot/token"

	tests := []struct {
		name, path, body string
		method           string
		code             int
		msg              string // for an error, when set
		want             issued // for 201
	}{
		{name: "defaults", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest"}`, code: http.StatusCreated,
			want: issued{"default", "robot", sa.Metadata.UID, []string{"https://kubernetes.default.svc"}, time.Hour}},
		{name: "audiences and duration", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["x","y"],"expirationSeconds":600}}`,
			code: http.StatusCreated, want: issued{"default", "robot", sa.Metadata.UID, []string{"x", "y"}, 10 * time.Minute}},
		{name: "capped at the maximum", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":864000}}`,
			code: http.StatusCreated, want: issued{"default", "robot", sa.Metadata.UID, []string{"https://kubernetes.default.svc"}, 48 * time.Hour}},
		{name: "too short", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":599}}`, code: http.StatusUnprocessableEntity,
			msg: `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes`},
		{name: "bound to a Pod", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p"}}}`,
			code: http.StatusNotFound, msg: `pods "p" not found`},
		{name: "bound to a Node", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Node","apiVersion":"v1","name":"n"}}}`,
			code: http.StatusNotFound, msg: `nodes "n" not found`},
		{name: "bound to a missing Secret", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Secret","apiVersion":"v1","name":"s"}}}`,
			code: http.StatusNotFound, msg: `secrets "s" not found`},
		{name: "bound to a ConfigMap", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"ConfigMap","apiVersion":"v1","name":"c"}}}`,
			code: http.StatusBadRequest, msg: `cannot bind token to object of type /v1, Kind=ConfigMap`},
		{name: "not a TokenRequest", body: `{"apiVersion":"v1","kind":"ServiceAccount"}`, code: http.StatusBadRequest},
		{name: "another name", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","metadata":{"name":"other"}}`, code: http.StatusBadRequest},
		{name: "no such ServiceAccount", path: "/api/v1/namespaces/default/serviceaccounts/ghost/token", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest"}`, code: http.StatusNotFound},
		{name: "GET", method: http.MethodGet, code: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path == "" {
				tt.path = path
			}
			if tt.method == "" {
				tt.method = http.MethodPost
			}
			b := ts.mustDo(t, tt.code, request{method: tt.method, path: tt.path, body: tt.body})
			if tt.code != http.StatusCreated {
				if st := status(t, b); st.Code != int32(tt.code) || tt.msg != "" && st.Message != tt.msg {
					t.Fatalf("status %+v, want message %q", st, tt.msg)
				}
				return
			}
			var tr authenticationv1.TokenRequest
			if err := json.Unmarshal(b, &tr); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := last
			mu.Unlock()
			if got.namespace != tt.want.namespace || got.name != tt.want.name || got.uid != tt.want.uid ||
				!slices.Equal(got.audiences, tt.want.audiences) || got.lifetime != tt.want.lifetime {
				t.Fatalf("issued %+v, want %+v", got, tt.want)
			}
			if tr.Kind != "TokenRequest" || tr.Status.Token != "signed" || !tr.Status.ExpirationTimestamp.Time.Equal(now.Add(tt.want.lifetime)) ||
				tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != int64(tt.want.lifetime/time.Second) ||
				!slices.Equal(tr.Spec.Audiences, tt.want.audiences) || tr.Name != "robot" || tr.Namespace != "default" {
				t.Fatalf("response %s", b)
			}
		})
	}
}
