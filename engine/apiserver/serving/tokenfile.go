package serving

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
)

// tokenFileCheckInterval is how often, at most, a TokenFile looks whether
// its file changed.
const tokenFileCheckInterval = time.Second

// TokenFile authenticates the bearer tokens of a static token file
// (kube-apiserver's --token-auth-file): CSV lines of token, user name, uid
// and, optionally, the user's groups in one field ("group1,group2"). It
// re-reads the file when it changes (looking at most once a second, when a
// token is presented); a file that no longer parses keeps the tokens read
// before, and the error, which names a line but no token, is logged.
type TokenFile struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	tokens atomic.Pointer[tokenfile.TokenAuthenticator]
	// checked is when the file was last looked at (Unix nanoseconds).
	checked atomic.Int64

	mu    sync.Mutex // held while the file is looked at; guards stamp
	stamp fileStamp  // of the file last read, parsed or not
}

var _ authenticator.Token = (*TokenFile)(nil)

// fileStamp tells a file's versions apart.
type fileStamp struct {
	info os.FileInfo
}

func (s fileStamp) same(info os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, info) && s.info.Size() == info.Size() && s.info.ModTime().Equal(info.ModTime())
}

// NewTokenFile reads the token file at path; it fails when the file is
// missing or does not parse.
func NewTokenFile(path string, log *slog.Logger) (*TokenFile, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &TokenFile{path: path, log: log, now: time.Now}
	info, tokens, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	f.tokens.Store(tokenfile.New(tokens))
	f.stamp = fileStamp{info}
	f.checked.Store(f.now().UnixNano())
	return f, nil
}

// AuthenticateToken returns the user of token, after re-reading the file
// if it changed.
func (f *TokenFile) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	f.reload()
	return f.tokens.Load().AuthenticateToken(ctx, token)
}

// reload re-reads the file if it changed since it was last read, at most
// once per tokenFileCheckInterval.
func (f *TokenFile) reload() {
	if f.now().UnixNano()-f.checked.Load() < int64(tokenFileCheckInterval) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now().UnixNano()
	if now-f.checked.Load() < int64(tokenFileCheckInterval) {
		return // looked at while this call waited
	}
	f.checked.Store(now)
	info, err := os.Stat(f.path)
	if err != nil {
		if f.stamp.info != nil {
			f.log.Error("token file unreadable; keeping the tokens read before", "path", f.path, "err", err)
			f.stamp = fileStamp{}
		}
		return
	}
	if f.stamp.same(info) {
		return
	}
	info, tokens, err := readTokenFile(f.path)
	if info != nil {
		f.stamp = fileStamp{info}
	}
	if err != nil {
		f.log.Error("token file changed but does not parse; keeping the tokens read before", "path", f.path, "err", err)
		return
	}
	f.tokens.Store(tokenfile.New(tokens))
	f.log.Info("token file reloaded", "path", f.path, "tokens", len(tokens))
}

// readTokenFile reads and parses the token file at path, returning the
// file's information as read.
func readTokenFile(path string) (os.FileInfo, map[string]*user.DefaultInfo, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("token file: %w", err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("token file: %w", err)
	}
	data, err := io.ReadAll(fh)
	if err != nil {
		return nil, nil, fmt.Errorf("token file %s: %w", path, err)
	}
	tokens, err := ParseTokenFile(data)
	if err != nil {
		return info, nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return info, tokens, nil
}

// ParseTokenFile parses a token file in Kubernetes' CSV format: one line per
// token, with at least three fields (token, user name, uid) and an optional
// fourth, the groups, separated by commas inside the field (quote it:
// "group1,group2"); further fields are ignored. Errors name the line, never
// the token.
func ParseTokenFile(data []byte) (map[string]*user.DefaultInfo, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	tokens := map[string]*user.DefaultInfo{}
	lines := map[string]int{}
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%w: line %d: %v", ErrBadTokenFile, pe.StartLine, pe.Err)
			}
			return nil, fmt.Errorf("%w: %v", ErrBadTokenFile, err)
		}
		line, _ := r.FieldPos(0)
		if len(record) < 3 {
			return nil, fmt.Errorf("%w: line %d: want at least 3 fields (token, user name, uid), found %d", ErrBadTokenFile, line, len(record))
		}
		tok, name, uid := record[0], strings.TrimSpace(record[1]), strings.TrimSpace(record[2])
		switch {
		case tok == "":
			return nil, fmt.Errorf("%w: line %d: the token is empty", ErrBadTokenFile, line)
		case strings.ContainsAny(tok, " \t\r\n"):
			return nil, fmt.Errorf("%w: line %d: the token holds whitespace", ErrBadTokenFile, line)
		case name == "":
			return nil, fmt.Errorf("%w: line %d: the user name is empty", ErrBadTokenFile, line)
		}
		if first, dup := lines[tok]; dup {
			return nil, fmt.Errorf("%w: line %d: the token of line %d again", ErrBadTokenFile, line, first)
		}
		lines[tok] = line
		u := &user.DefaultInfo{Name: name, UID: uid}
		if len(record) >= 4 {
			for _, g := range strings.Split(record[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		tokens[tok] = u
	}
	return tokens, nil
}
