package testserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// Watch follows a watch on one collection of the server, as a client sees
// it over HTTP, until the context given to Server.Watch ends. It counts
// the ADDED events of each object by name, keeps the uid each was last
// added with, and counts the DELETED events.
type Watch struct {
	mu      sync.Mutex
	added   map[string]int
	uids    map[string]string
	deleted int
	err     error
}

// Watch opens a watch (?watch=1) with the admin token on the collection at
// path (such as /apis/coordination.k8s.io/v1/namespaces/default/leases)
// and follows it until ctx ends. It fails unless the server answers 200.
func (s *Server) Watch(ctx context.Context, path string) (*Watch, error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path+sep+"watch=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	c := s.HTTPClient()
	c.Timeout = 0
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("watch %s: %s", path, resp.Status)
	}
	w := &Watch{added: map[string]int{}, uids: map[string]string{}}
	go w.follow(ctx, resp)
	return w, nil
}

func (w *Watch) follow(ctx context.Context, resp *http.Response) {
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var e struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name string `json:"name"`
					UID  string `json:"uid"`
				} `json:"metadata"`
			} `json:"object"`
		}
		err := dec.Decode(&e)
		w.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				w.err = err
			}
			w.mu.Unlock()
			return
		}
		switch e.Type {
		case "ADDED":
			w.added[e.Object.Metadata.Name]++
			w.uids[e.Object.Metadata.Name] = e.Object.Metadata.UID
		case "DELETED":
			w.deleted++
		}
		w.mu.Unlock()
	}
}

// Added returns how many ADDED events named name so far.
func (w *Watch) Added(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.added[name]
}

// AddedAll returns the ADDED events so far, counted by name.
func (w *Watch) AddedAll() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.added)
}

// UID returns the uid of the last ADDED event that named name.
func (w *Watch) UID(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.uids[name]
}

// Deleted returns how many DELETED events came so far.
func (w *Watch) Deleted() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleted
}

// Err returns what ended the watch before its context did, or nil.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
