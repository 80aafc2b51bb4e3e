package serviceaccount

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/badger"
)

func openStore(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(t.TempDir(), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rotate loads st's keys as a replica that rotates them does, at the time
// now tells (the wall clock when nil).
func rotate(t *testing.T, st store.Store, now func() time.Time) *Keys {
	t.Helper()
	k, err := LoadKeys(context.Background(), st, KeysOptions{Now: now, Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Every server on one store gets the same keys; the first creates them.
func TestLoadKeysShared(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	a, err := LoadKeys(ctx, st, KeysOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadKeys(ctx, st, KeysOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.CurrentID() == "" || a.CurrentID() != b.CurrentID() || len(b.IDs()) != 1 {
		t.Fatalf("keys = %v (current %s) and %v (current %s); want one shared key", a.IDs(), a.CurrentID(), b.IDs(), b.CurrentID())
	}
}

// Rotation makes a new key current; tokens the older key signed still
// verify, on the rotating server and on one that loaded the keys before
// the rotation and meets a token signed by the new key.
func TestRotatedKeyStillVerifies(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	first, err := LoadKeys(ctx, st, KeysOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := newFixture(t, first)
	oldTok := before.issue(t)

	rotated := rotate(t, st, nil)
	if rotated.CurrentID() == first.CurrentID() || !slices.Contains(rotated.IDs(), first.CurrentID()) {
		t.Fatalf("after rotation: current %s, keys %v; want a new current key and the old one kept", rotated.CurrentID(), rotated.IDs())
	}
	after := newFixture(t, rotated)
	if _, ok, err := after.auth.AuthenticateToken(ctx, oldTok); !ok || err != nil {
		t.Fatalf("a token of the older key after rotation: %v, %v", ok, err)
	}
	newTok := after.issue(t)
	// first was loaded before the rotation: it reads the store again for
	// the unknown key (another replica rotated).
	first.mu.Lock()
	first.lastReload = time.Time{}
	first.mu.Unlock()
	if _, ok, err := before.auth.AuthenticateToken(ctx, newTok); !ok || err != nil {
		t.Fatalf("the new key's token on a server loaded before the rotation: %v, %v", ok, err)
	}
	// It still signs with the key it had, which verifies everywhere.
	if first.CurrentID() == rotated.CurrentID() {
		t.Fatal("a reload changed the signing key")
	}
}

// A key that stopped signing longer ago than the longest token lifetime
// signs nothing still valid: rotation drops it.
func TestRotationDropsExpiredKeys(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	clock := func() time.Time { return now }
	k1, err := LoadKeys(ctx, st, KeysOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	k2 := rotate(t, st, clock)
	now = now.Add(DefaultMaxExpiration - time.Minute)
	k3 := rotate(t, st, clock)
	if len(k3.IDs()) != 3 {
		t.Fatalf("keys after two rotations within the token lifetime = %d, want 3", len(k3.IDs()))
	}
	now = now.Add(2 * time.Minute)
	k4 := rotate(t, st, clock)
	ids := k4.IDs()
	if slices.Contains(ids, k1.CurrentID()) || !slices.Contains(ids, k2.CurrentID()) || !slices.Contains(ids, k3.CurrentID()) || len(ids) != 3 {
		t.Fatalf("keys = %v; want the first dropped (k2 %s, k3 %s kept) and a new one", ids, k2.CurrentID(), k3.CurrentID())
	}
}

// PublicKeys publishes a key another replica made current once the store
// may be read again, and every key on a fixed set.
func TestPublicKeysFollowTheStore(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	first, err := LoadKeys(ctx, st, KeysOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(first.PublicKeys(ctx))); !slices.Equal(got, []string{first.CurrentID()}) {
		t.Fatalf("public keys %v, want [%s]", got, first.CurrentID())
	}
	rotated := rotate(t, st, clock)
	// Within reloadEvery of the last read: not yet.
	if _, ok := first.PublicKeys(ctx)[rotated.CurrentID()]; ok {
		t.Fatal("the rotated key was published before the store could be read again")
	}
	now = now.Add(reloadEvery)
	pub := first.PublicKeys(ctx)
	want := slices.Sorted(slices.Values(rotated.IDs()))
	if got := slices.Sorted(maps.Keys(pub)); !slices.Equal(got, want) {
		t.Fatalf("public keys after the other replica rotated: %v, want %v", got, want)
	}
	if !pub[rotated.CurrentID()].Equal(rotated.signing().key.Public()) || first.CurrentID() == rotated.CurrentID() {
		t.Fatal("the published key differs from the signing key, or the reload changed the signing key")
	}

	k1, _ := GenerateKey()
	k2, _ := GenerateKey()
	fixed := NewKeys(k1, k2)
	if got := fixed.PublicKeys(ctx); len(got) != 2 || !got[KeyID(&k1.PublicKey)].Equal(&k1.PublicKey) {
		t.Fatalf("a fixed set's public keys: %v", got)
	}
}

// The generation of the verifying keys stays put while they do (a reload
// that finds nothing new included) and moves when another replica's
// rotation is read, so that what was built from them can be kept until
// then.
func TestGenerationFollowsTheKeys(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	first, err := LoadKeys(ctx, st, KeysOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	gen := first.Generation(ctx)
	now = now.Add(reloadEvery)
	if got := first.Generation(ctx); got != gen {
		t.Fatalf("generation %d after a reload that found no new key, want %d", got, gen)
	}
	rotate(t, st, clock)
	if got := first.Generation(ctx); got != gen {
		t.Fatalf("generation %d before the store could be read again, want %d", got, gen)
	}
	now = now.Add(reloadEvery)
	moved := first.Generation(ctx)
	if moved == gen || len(first.PublicKeys(ctx)) != 2 {
		t.Fatalf("generation %d and %d keys after the other replica rotated, want a new generation and 2 keys", moved, len(first.PublicKeys(ctx)))
	}
}
