package serving

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestParseTokenFile(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    map[string]*user.DefaultInfo
		wantErr string
	}{
		{name: "empty", data: "", want: map[string]*user.DefaultInfo{}},
		{name: "user without groups", data: "tok1,alice,uid-1\n",
			want: map[string]*user.DefaultInfo{"tok1": {Name: "alice", UID: "uid-1"}}},
		{name: "groups quoted", data: "tok1,alice,uid-1,\"dev,ops\"\ntok2,bob,,viewers\n",
			want: map[string]*user.DefaultInfo{
				"tok1": {Name: "alice", UID: "uid-1", Groups: []string{"dev", "ops"}},
				"tok2": {Name: "bob", Groups: []string{"viewers"}},
			}},
		{name: "blank lines and extra fields", data: "\ntok1,alice,1,dev,ignored\n\n",
			want: map[string]*user.DefaultInfo{"tok1": {Name: "alice", UID: "1", Groups: []string{"dev"}}}},
		{name: "too few fields", data: "tok1,alice,1\nsecret-two,bob\n", wantErr: "line 2: want at least 3 fields"},
		{name: "empty token", data: ",alice,1\n", wantErr: "line 1: the token is empty"},
		{name: "empty user", data: "tok1,,1\n", wantErr: "line 1: the user name is empty"},
		{name: "duplicate token", data: "tok1,alice,1\n\ntok1,bob,2\n", wantErr: "line 3: the token of line 1 again"},
		{name: "bad quoting", data: "tok1,alice,1\nsecret-x,bob,2,\"dev\n", wantErr: "line 2:"},
		{name: "bare quote", data: "tok1,alice,1\nsec\"ret,bob,2\n", wantErr: "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokenFile([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadTokenFile) {
					t.Fatalf("error %v, want ErrBadTokenFile with %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error quotes a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTokenFileReload: a token added to the file authenticates and a token
// removed from it no longer does, once the check interval has passed; a
// version of the file that does not parse keeps the tokens read before and
// is logged without any token; a missing file fails at start.
func TestTokenFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	write := func(data string) {
		t.Helper()
		// Through a rename, as editors and config management do.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewTokenFile(path, nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want not exist", err)
	}
	write("old-token,alice,1,dev\n")
	logs := &syncBuffer{}
	f, err := NewTokenFile(path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.now = func() time.Time { return now }
	check := func(tok, wantUser string) {
		t.Helper()
		resp, ok, err := f.AuthenticateToken(context.Background(), tok)
		switch {
		case err != nil:
			t.Fatalf("%s: %v", tok, err)
		case wantUser == "" && ok:
			t.Fatalf("%s: authenticated as %q, want refused", tok, resp.User.GetName())
		case wantUser != "" && (!ok || resp.User.GetName() != wantUser):
			t.Fatalf("%s: %v %v, want %q", tok, ok, resp, wantUser)
		}
	}
	check("old-token", "alice")
	check("new-token", "")

	write("new-token,bob,2\n")
	check("new-token", "") // within the interval: not looked at yet
	now = now.Add(tokenFileCheckInterval)
	check("new-token", "bob")
	check("old-token", "")

	write("new-token,bob,2\nsecret-three,carol\n")
	now = now.Add(tokenFileCheckInterval)
	check("new-token", "bob")
	check("secret-three", "")
	if out := logs.String(); !strings.Contains(out, "line 2: want at least 3 fields") || strings.Contains(out, "secret-three") || strings.Contains(out, "new-token") {
		t.Errorf("logs:\n%s\nwant the bad line named and no token", out)
	}

	// The same bad file is not logged again; a good one is read again.
	before := strings.Count(logs.String(), "does not parse")
	now = now.Add(tokenFileCheckInterval)
	check("new-token", "bob")
	if n := strings.Count(logs.String(), "does not parse"); n != before {
		t.Errorf("the unchanged bad file was logged %d more times", n-before)
	}
	write("third-token,dave,4\n")
	now = now.Add(tokenFileCheckInterval)
	check("third-token", "dave")
	check("new-token", "")
}

// TestTokenFileConcurrent: tokens are checked while the file changes, for
// the race detector.
func TestTokenFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("tok,alice,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := NewTokenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var clock sync.Mutex
	now := time.Now()
	f.now = func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(tokenFileCheckInterval)
		return now
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if _, ok, _ := f.AuthenticateToken(context.Background(), "tok"); !ok {
					t.Error("tok refused")
					return
				}
			}
		})
	}
	for i := range 50 {
		data := "tok,alice,1\n"
		if i%2 == 0 {
			data += "other,bob,2\n"
		}
		// Renamed into place: a file truncated and rewritten could be
		// read empty, which is a valid file without tokens.
		if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
