package fakedns

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Record is one DNS record as the service holds it.
type Record struct {
	ID    string `json:"id"`
	Zone  string `json:"zone"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
	TTL   int64  `json:"ttl"`
	// Owner is an opaque mark the client that created the record chose
	// (the DNSRecord plugin writes the object's UID), so that a client
	// can tell its records from others' of the same name.
	Owner string `json:"owner,omitempty"`
	// Version counts the writes of the record: 1 when created, one more
	// at each update. A read that shows a lower version than a write
	// returned is stale.
	Version int64 `json:"version"`
}

// Errors of the record store, as the API maps them to status codes.
var (
	errNotFound = errors.New("fakedns: record not found")
	errExists   = errors.New("fakedns: a record of that name and type exists in the zone")
	errInvalid  = errors.New("fakedns: invalid record")
)

// snapshot is a record's state from a time on; gone marks its deletion.
type snapshot struct {
	at   time.Time
	rec  Record
	gone bool
}

// records is the service's state: the latest state of each record, which
// writes see and change, and each record's recent history, from which
// reads are served as they were delay ago (eventual consistency). The
// Server's mutex guards it.
type records struct {
	delay   time.Duration
	latest  map[string]Record
	history map[string][]snapshot
	nextID  int
}

func newRecords(delay time.Duration) *records {
	return &records{delay: delay, latest: map[string]Record{}, history: map[string][]snapshot{}}
}

// types are the record types the service accepts.
var types = []string{"A", "CNAME", "TXT"}

func validate(r Record) error {
	switch {
	case r.Zone == "" || r.Name == "":
		return fmt.Errorf("%w: zone and name are required", errInvalid)
	case !slices.Contains(types, r.Type):
		return fmt.Errorf("%w: type %q is not one of A, CNAME, TXT", errInvalid, r.Type)
	case r.Value == "":
		return fmt.Errorf("%w: value is required", errInvalid)
	case r.TTL < 1:
		return fmt.Errorf("%w: ttl must be positive", errInvalid)
	}
	return nil
}

// record notes a write at now.
func (rs *records) record(now time.Time, rec Record, gone bool) {
	if gone {
		delete(rs.latest, rec.ID)
	} else {
		rs.latest[rec.ID] = rec
	}
	h := append(rs.history[rec.ID], snapshot{at: now, rec: rec, gone: gone})
	// Keep the last snapshot a read at now-delay can see, and what follows.
	cut := 0
	for i, s := range h {
		if !s.at.After(now.Add(-rs.delay)) {
			cut = i
		}
	}
	rs.history[rec.ID] = h[cut:]
}

// create adds a record, refusing one whose zone, name and type another
// record has (errExists, with that record).
func (rs *records) create(now time.Time, r Record) (Record, error) {
	if err := validate(r); err != nil {
		return Record{}, err
	}
	for _, o := range rs.latest {
		if o.Zone == r.Zone && o.Name == r.Name && o.Type == r.Type {
			return o, errExists
		}
	}
	rs.nextID++
	r.ID = "r" + strconv.Itoa(rs.nextID)
	r.Version = 1
	rs.record(now, r, false)
	return r, nil
}

// update sets a record's value and TTL.
func (rs *records) update(now time.Time, zone, id, value string, ttl int64) (Record, error) {
	r, ok := rs.latest[id]
	if !ok || r.Zone != zone {
		return Record{}, errNotFound
	}
	r.Value, r.TTL = value, ttl
	if err := validate(r); err != nil {
		return Record{}, err
	}
	r.Version++
	rs.record(now, r, false)
	return r, nil
}

// remove deletes a record.
func (rs *records) remove(now time.Time, zone, id string) error {
	r, ok := rs.latest[id]
	if !ok || r.Zone != zone {
		return errNotFound
	}
	rs.record(now, r, true)
	return nil
}

// read returns a record as reads see it at now: as it was delay ago.
func (rs *records) read(now time.Time, id string) (Record, bool) {
	at := now.Add(-rs.delay)
	var found *snapshot
	for i, s := range rs.history[id] {
		if !s.at.After(at) {
			found = &rs.history[id][i]
		}
	}
	if found == nil || found.gone {
		return Record{}, false
	}
	return found.rec, true
}

// list returns the records of a zone as reads see them at now, with the
// given name and type when those are set, ordered by ID.
func (rs *records) list(now time.Time, zone, name, typ string) []Record {
	out := []Record{}
	for id := range rs.history {
		r, ok := rs.read(now, id)
		if ok && r.Zone == zone && (name == "" || r.Name == name) && (typ == "" || r.Type == typ) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return compareIDs(a.ID, b.ID) })
	return out
}

// all returns every record's latest state, ordered by ID.
func (rs *records) all() []Record {
	out := make([]Record, 0, len(rs.latest))
	for _, r := range rs.latest {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return compareIDs(a.ID, b.ID) })
	return out
}

// compareIDs orders "r2" before "r10".
func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
