package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

const (
	magic = "SETPOINT-SNAPSHOT\n"
	// Version is the format version this package writes and reads.
	Version = 1
	// maxHeader bounds the JSON header a reader accepts.
	maxHeader = 16 << 20
	// MaxKey and MaxValue bound one record a reader accepts, so a damaged
	// length cannot make it allocate gigabytes.
	MaxKey   = 64 << 10
	MaxValue = 256 << 20
)

var (
	// ErrCorrupt is returned for a file that is not a whole, intact snapshot.
	ErrCorrupt = errors.New("snapshot: file is damaged or truncated")
	// ErrVersion is returned for a snapshot of a format this build cannot read.
	ErrVersion = errors.New("snapshot: unsupported format version")
)

// Header describes a snapshot.
type Header struct {
	// Revision is the store revision every record was read at.
	Revision int64 `json:"revision"`
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// Keys is the number of records.
	Keys int64 `json:"keys"`
	// Counts is the number of keys per resource, as Resource names it.
	Counts map[string]int64 `json:"counts"`
	// Secrets tells whether security keys (see IsSecret) were included.
	Secrets bool `json:"secrets"`
}

// Resource names the resource a key belongs to: its first two segments,
// "group/resource" ("core/namespaces", "setpoint.dev/plugins",
// "~setpoint/modules").
func Resource(key string) string {
	parts := strings.SplitN(strings.TrimPrefix(key, "/"), "/", 3)
	if len(parts) < 2 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}

// SortedCounts returns h.Counts' resources in order.
func (h *Header) SortedCounts() []string {
	names := make([]string, 0, len(h.Counts))
	for n := range h.Counts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Writer writes a snapshot file.
type Writer struct {
	w       *bufio.Writer
	h       hash.Hash
	mw      io.Writer
	want    int64
	written int64
	err     error
}

// NewWriter writes the magic, the version and hdr to w. Exactly hdr.Keys
// records must follow, then Close.
func NewWriter(w io.Writer, hdr Header) (*Writer, error) {
	sw := &Writer{w: bufio.NewWriterSize(w, 256<<10), h: sha256.New(), want: hdr.Keys}
	sw.mw = io.MultiWriter(sw.w, sw.h)
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	sw.write([]byte(magic))
	sw.u32(Version)
	sw.u32(uint32(len(js)))
	sw.write(js)
	return sw, sw.err
}

func (w *Writer) write(b []byte) {
	if w.err == nil {
		_, w.err = w.mw.Write(b)
	}
}

func (w *Writer) u32(v uint32) { w.write(binary.BigEndian.AppendUint32(nil, v)) }
func (w *Writer) i64(v int64)  { w.write(binary.BigEndian.AppendUint64(nil, uint64(v))) }

// Write appends one record.
func (w *Writer) Write(kv *store.KeyValue) error {
	if w.written >= w.want {
		return fmt.Errorf("snapshot: more records than the header's %d", w.want)
	}
	w.u32(uint32(len(kv.Key)))
	w.write([]byte(kv.Key))
	w.u32(uint32(len(kv.Value)))
	w.write(kv.Value)
	w.i64(kv.CreateRevision)
	w.i64(kv.ModRevision)
	w.written++
	return w.err
}

// Close writes the checksum trailer and flushes; it fails when fewer
// records than the header's were written.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.written != w.want {
		return fmt.Errorf("snapshot: %d records written, the header says %d", w.written, w.want)
	}
	if _, err := w.w.Write(w.h.Sum(nil)); err != nil {
		return err
	}
	return w.w.Flush()
}

// Reader reads a snapshot file.
type Reader struct {
	r      *bufio.Reader
	h      hash.Hash
	tr     io.Reader
	hdr    Header
	read   int64
	sum    string
	done   bool
	counts map[string]int64
}

// NewReader reads and checks the magic, the version and the header.
func NewReader(r io.Reader) (*Reader, error) {
	sr := &Reader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New(), counts: map[string]int64{}}
	sr.tr = io.TeeReader(sr.r, sr.h)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(sr.tr, m); err != nil || string(m) != magic {
		return nil, fmt.Errorf("%w: not a Setpoint snapshot (bad magic)", ErrCorrupt)
	}
	v, err := sr.u32()
	if err != nil {
		return nil, err
	}
	if v != Version {
		return nil, fmt.Errorf("%w %d (this build reads %d)", ErrVersion, v, Version)
	}
	n, err := sr.u32()
	if err != nil {
		return nil, err
	}
	if n > maxHeader {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrCorrupt, n)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(sr.tr, js); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if err := json.Unmarshal(js, &sr.hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if sr.hdr.Keys < 0 || sr.hdr.Revision < 1 {
		return nil, fmt.Errorf("%w: header has %d keys at revision %d", ErrCorrupt, sr.hdr.Keys, sr.hdr.Revision)
	}
	return sr, nil
}

// Header returns the snapshot's header.
func (r *Reader) Header() Header { return r.hdr }

func (r *Reader) u32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r.tr, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

func (r *Reader) i64() (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r.tr, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return int64(binary.BigEndian.Uint64(b[:])), nil
}

// Next returns the next record, or io.EOF after the last one once the
// checksum trailer matched. A record is only known good once Next has
// returned io.EOF: restore everything first, and discard it on an error.
func (r *Reader) Next() (*store.KeyValue, error) {
	if r.read == r.hdr.Keys {
		if !r.done {
			if err := r.finish(); err != nil {
				return nil, err
			}
		}
		return nil, io.EOF
	}
	kl, err := r.u32()
	if err != nil {
		return nil, err
	}
	if kl == 0 || kl > MaxKey {
		return nil, fmt.Errorf("%w: record %d has a key of %d bytes", ErrCorrupt, r.read, kl)
	}
	key := make([]byte, kl)
	if _, err := io.ReadFull(r.tr, key); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	vl, err := r.u32()
	if err != nil {
		return nil, err
	}
	if vl > MaxValue {
		return nil, fmt.Errorf("%w: record %d has a value of %d bytes", ErrCorrupt, r.read, vl)
	}
	val := make([]byte, vl)
	if _, err := io.ReadFull(r.tr, val); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	kv := &store.KeyValue{Key: string(key), Value: val}
	if kv.CreateRevision, err = r.i64(); err != nil {
		return nil, err
	}
	if kv.ModRevision, err = r.i64(); err != nil {
		return nil, err
	}
	if kv.ModRevision < 1 || kv.ModRevision > r.hdr.Revision || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision {
		return nil, fmt.Errorf("%w: record %d (%s) has revisions %d/%d outside the snapshot's %d",
			ErrCorrupt, r.read, kv.Key, kv.CreateRevision, kv.ModRevision, r.hdr.Revision)
	}
	r.read++
	r.counts[Resource(kv.Key)]++
	return kv, nil
}

func (r *Reader) finish() error {
	want := r.h.Sum(nil)
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(r.r, got); err != nil {
		return fmt.Errorf("%w: no checksum trailer: %v", ErrCorrupt, err)
	}
	if string(got) != string(want) {
		return fmt.Errorf("%w: checksum mismatch: the file says %x, its content hashes to %x", ErrCorrupt, got, want)
	}
	if n, _ := r.r.Read(make([]byte, 1)); n != 0 {
		return fmt.Errorf("%w: data after the checksum trailer", ErrCorrupt)
	}
	for res, n := range r.hdr.Counts {
		if r.counts[res] != n {
			return fmt.Errorf("%w: header counts %d keys of %s, the file holds %d", ErrCorrupt, n, res, r.counts[res])
		}
	}
	for res, n := range r.counts {
		if r.hdr.Counts[res] != n {
			return fmt.Errorf("%w: header counts %d keys of %s, the file holds %d", ErrCorrupt, r.hdr.Counts[res], res, n)
		}
	}
	r.sum = hex.EncodeToString(got)
	r.done = true
	return nil
}

// Checksum is the file's sha256 trailer in hex, known once Next returned
// io.EOF.
func (r *Reader) Checksum() string { return r.sum }

// Verify reads a whole snapshot, checking every record and the checksum.
func Verify(rd io.Reader) (Header, string, error) {
	r, err := NewReader(rd)
	if err != nil {
		return Header{}, "", err
	}
	for {
		if _, err := r.Next(); err == io.EOF {
			return r.hdr, r.sum, nil
		} else if err != nil {
			return r.hdr, "", err
		}
	}
}
