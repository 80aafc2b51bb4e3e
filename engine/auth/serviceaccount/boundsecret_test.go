package serviceaccount

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// secretStore is a settable set of Secrets: namespace/name -> object.
type secretStore struct {
	mu sync.Mutex
	m  map[string]*unstructured.Unstructured
}

func (s *secretStore) Get(_ context.Context, gvr schema.GroupVersionResource, ns, name string, _ metav1.GetOptions) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.m[ns+"/"+name]; ok && gvr == secrets {
		return o.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (s *secretStore) set(ns, name, uid string, deleted *time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid == "" {
		delete(s.m, ns+"/"+name)
		return
	}
	o := &unstructured.Unstructured{}
	o.SetName(name)
	o.SetNamespace(ns)
	o.SetUID(types.UID(uid))
	if deleted != nil {
		o.SetDeletionTimestamp(&metav1.Time{Time: *deleted})
	}
	s.m[ns+"/"+name] = o
}

// TestTokenBoundToSecret: a token bound to a Secret works while the
// Secret exists with its UID, and within a minute of its deletion (held by
// a finalizer), as in Kubernetes; not after, not once it is gone or
// replaced, and not at all by an authenticator that cannot read Secrets.
func TestTokenBoundToSecret(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, NewKeys(mustKey(t)))
	store := &secretStore{m: map[string]*unstructured.Unstructured{}}
	store.set("team", "s", "secret-1", nil)
	bound, err := NewAuthenticator(AuthenticatorOptions{Keys: f.keys, Accounts: f.accounts, Secrets: store, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := f.issuer.Issue(Request{Namespace: "team", Name: "robot", UID: "uid-1", Audiences: []string{DefaultIssuer}, Lifetime: time.Hour,
		Secret: &BoundObject{Name: "s", UID: "secret-1"}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, a *Authenticator, ok bool) {
		t.Helper()
		_, got, err := a.AuthenticateToken(ctx, tok)
		if got != ok || !ok && !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: authenticated %v, err %v; want %v", what, got, err, ok)
		}
	}
	check("Secret there", bound, true)
	check("an authenticator without Secrets", f.auth, false)

	deleted := f.now
	store.set("team", "s", "secret-1", &deleted)
	f.now = f.now.Add(30 * time.Second)
	check("30 s after the Secret was marked deleted", bound, true)
	f.now = f.now.Add(time.Minute)
	check("90 s after the Secret was marked deleted", bound, false)

	store.set("team", "s", "secret-2", nil)
	check("Secret created again", bound, false)
	store.set("team", "s", "", nil)
	check("Secret gone", bound, false)

	if _, _, err := f.issuer.Issue(Request{Namespace: "team", Name: "robot", UID: "uid-1", Audiences: []string{DefaultIssuer}, Lifetime: time.Hour,
		Secret: &BoundObject{Name: "s"}}); err == nil {
		t.Error("Issue bound to a Secret without its UID: no error")
	}
}
