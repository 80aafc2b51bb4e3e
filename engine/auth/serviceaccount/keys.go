package serviceaccount

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// KeysKey is the store key of the signing keys. It is a private key
// (store.PrivatePrefix), beside the server's identity, so the API never
// serves it.
const KeysKey = store.PrivatePrefix + "serviceaccount-keys"

// keysVersion is the format of the stored key record.
const keysVersion = 1

// maxKeysAttempts bounds the compare-and-swap retries when replicas write
// the keys at the same time.
const maxKeysAttempts = 8

// reloadEvery bounds how often a token signed by an unknown key makes Keys
// read the store again (another replica may have rotated): at most once a
// second, whatever the number of such tokens.
const reloadEvery = time.Second

// keyRecord is what the store keeps under KeysKey: every key that may still
// verify a token, oldest first; the last one signs.
type keyRecord struct {
	Version int         `json:"version"`
	Keys    []storedKey `json:"keys"`
}

type storedKey struct {
	// Key is the private key, PKCS #8 PEM.
	Key string `json:"key"`
	// Created is when the key was made, and so when the key before it
	// stopped signing.
	Created time.Time `json:"created"`
}

// KeysOptions configures LoadKeys.
type KeysOptions struct {
	// Rotate makes a new key current; the older ones keep verifying until
	// no token they signed can still be valid (MaxTokenLifetime after they
	// stopped signing), and are then dropped.
	Rotate bool
	// MaxTokenLifetime is the longest a token may live;
	// DefaultMaxExpiration when zero.
	MaxTokenLifetime time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Keys are the keys that sign and verify ServiceAccount tokens: the current
// key signs, every key verifies. It is safe for concurrent use.
type Keys struct {
	st  store.Store // where the keys live; nil for a fixed set
	now func() time.Time

	mu         sync.RWMutex // guards the fields below
	current    *signingKey
	public     map[string]*ecdsa.PublicKey // by key ID
	generation uint64                      // changes whenever public does
	lastReload time.Time
}

type signingKey struct {
	id  string
	key *ecdsa.PrivateKey
}

// NewKeys returns a fixed set of keys: the last one signs, all verify.
func NewKeys(keys ...*ecdsa.PrivateKey) *Keys {
	k := &Keys{now: time.Now}
	k.set(keys)
	return k
}

// GenerateKey returns a new P-256 signing key.
func GenerateKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("serviceaccount: generate a signing key: %w", err)
	}
	return key, nil
}

// KeyID is the key ID (the JWT "kid" header) of a public key: the
// unpadded base64url SHA-256 of its PKIX DER form, as Kubernetes computes
// it.
func KeyID(pub *ecdsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (k *Keys) set(keys []*ecdsa.PrivateKey) {
	public := make(map[string]*ecdsa.PublicKey, len(keys))
	var cur *signingKey
	for _, key := range keys {
		id := KeyID(&key.PublicKey)
		public[id] = &key.PublicKey
		cur = &signingKey{id: id, key: key}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current, k.public = cur, public
	k.generation++
}

// IDs returns the IDs of the keys that verify, in no order.
func (k *Keys) IDs() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]string, 0, len(k.public))
	for id := range k.public {
		out = append(out, id)
	}
	return out
}

// PublicKeys returns the keys that verify, by key ID: what the issuer's
// JSON Web Key Set publishes. A stored set reads the store again first (at
// most once every reloadEvery), so that a key another replica made current
// is published by every replica.
func (k *Keys) PublicKeys(ctx context.Context) map[string]*ecdsa.PublicKey {
	k.reload(ctx)
	k.mu.RLock()
	defer k.mu.RUnlock()
	return maps.Clone(k.public)
}

// Generation returns a number that changes whenever the keys that verify
// do (another replica's rotation included: it reads the store as
// PublicKeys does), so that what a caller built from PublicKeys may be
// kept until it changes. Read it before PublicKeys: a set newer than its
// generation only costs the caller one more rebuild.
func (k *Keys) Generation(ctx context.Context) uint64 {
	k.reload(ctx)
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.generation
}

// CurrentID returns the ID of the key that signs.
func (k *Keys) CurrentID() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.current == nil {
		return ""
	}
	return k.current.id
}

func (k *Keys) signing() *signingKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.current
}

// verifying returns the public key with ID id. A stored set that lacks it
// reads the store again (see reload), since another replica may have made
// a new key current.
func (k *Keys) verifying(ctx context.Context, id string) (*ecdsa.PublicKey, bool) {
	k.mu.RLock()
	pub, ok := k.public[id]
	k.mu.RUnlock()
	if ok || !k.reload(ctx) {
		return pub, ok
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	pub, ok = k.public[id]
	return pub, ok
}

// reload adds the stored keys to a stored set's verifying keys, reading
// the store at most once every reloadEvery; it tells whether it read them.
// The key this server signs with stays current: it still verifies
// everywhere.
func (k *Keys) reload(ctx context.Context) bool {
	if k.st == nil {
		return false
	}
	// Most calls come within reloadEvery of the last read: a read lock
	// tells them so without making them wait on each other.
	k.mu.RLock()
	due := k.now().Sub(k.lastReload) >= reloadEvery
	k.mu.RUnlock()
	if !due {
		return false
	}
	k.mu.Lock()
	if k.now().Sub(k.lastReload) < reloadEvery {
		k.mu.Unlock()
		return false
	}
	k.lastReload = k.now()
	k.mu.Unlock()
	rec, _, err := loadKeys(ctx, k.st)
	if err != nil || rec == nil {
		return false
	}
	keys, err := rec.parse()
	if err != nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	added := false
	for _, key := range keys {
		id := KeyID(&key.PublicKey)
		if _, ok := k.public[id]; !ok {
			k.public[id] = &key.PublicKey
			added = true
		}
	}
	if added {
		k.generation++
	}
	return true
}

// LoadKeys returns the keys kept in st, creating the first one on an empty
// store (the first replica to start wins the compare-and-swap; the others
// read its key) and, with opts.Rotate, making a new key current.
func LoadKeys(ctx context.Context, st store.Store, opts KeysOptions) (*Keys, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	keep := opts.MaxTokenLifetime
	if keep <= 0 {
		keep = DefaultMaxExpiration
	}
	for attempt := 1; ; attempt++ {
		if attempt > maxKeysAttempts {
			return nil, errors.New("serviceaccount: the signing keys kept changing in the store; giving up")
		}
		rec, rev, err := loadKeys(ctx, st)
		if err != nil {
			return nil, err
		}
		write := rec == nil || opts.Rotate
		if rec == nil {
			rec = &keyRecord{Version: keysVersion}
		}
		if write {
			key, err := GenerateKey()
			if err != nil {
				return nil, err
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, fmt.Errorf("serviceaccount: encode a signing key: %w", err)
			}
			t := now().UTC()
			rec.Keys = append(retained(rec.Keys, t, keep), storedKey{
				Key:     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
				Created: t,
			})
			b, _ := json.Marshal(rec) // strings and times only: cannot fail
			if rev == 0 {
				_, err = st.Create(ctx, KeysKey, b)
			} else {
				_, err = st.Update(ctx, KeysKey, b, rev)
			}
			if errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				// Another server wrote them meanwhile: use its keys, or
				// rotate on top of them.
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("serviceaccount: store the signing keys: %w", err)
			}
		}
		keys, err := rec.parse()
		if err != nil {
			return nil, err
		}
		k := &Keys{st: st, now: now, lastReload: now()}
		k.set(keys)
		return k, nil
	}
}

// retained returns the keys that may still verify a token at now: the
// current one, and each older one that stopped signing (its successor was
// created) less than keep ago.
func retained(keys []storedKey, now time.Time, keep time.Duration) []storedKey {
	var out []storedKey
	for i, k := range keys {
		if i == len(keys)-1 || now.Sub(keys[i+1].Created) < keep {
			out = append(out, k)
		}
	}
	return out
}

// loadKeys returns the stored keys and their revision; nil when the store
// has none.
func loadKeys(ctx context.Context, st store.Store) (*keyRecord, int64, error) {
	kv, err := st.Get(ctx, KeysKey, store.GetOptions{})
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("serviceaccount: read the signing keys: %w", err)
	}
	var rec keyRecord
	// The decoder's error is not wrapped: it may quote private keys.
	if json.Unmarshal(kv.Value, &rec) != nil {
		return nil, 0, fmt.Errorf("%w: not valid JSON", ErrBadKeys)
	}
	if rec.Version != keysVersion {
		return nil, 0, fmt.Errorf("%w: format version %d; this server reads %d", ErrBadKeys, rec.Version, keysVersion)
	}
	if len(rec.Keys) == 0 {
		return nil, 0, fmt.Errorf("%w: no key", ErrBadKeys)
	}
	return &rec, kv.ModRevision, nil
}

func (rec *keyRecord) parse() ([]*ecdsa.PrivateKey, error) {
	out := make([]*ecdsa.PrivateKey, 0, len(rec.Keys))
	for i, sk := range rec.Keys {
		block, _ := pem.Decode([]byte(sk.Key))
		if block == nil {
			return nil, fmt.Errorf("%w: key %d is not PEM", ErrBadKeys, i)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d is not a PKCS #8 private key", ErrBadKeys, i)
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: key %d is not a P-256 ECDSA key", ErrBadKeys, i)
		}
		out = append(out, ec)
	}
	return out, nil
}
