package badger

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Badger replays its logs at Open, the memtables' write-ahead logs (.mem)
// and the last value log (.vlog), entry by entry, and stops at the first
// entry whose checksum fails, cutting the log there as if it ended: that is
// how it drops the entry a crash cut off. It does the same to an entry
// damaged in the middle of a log, so a store whose process died before
// flushing its memtable would open without every write logged after the
// damage, acknowledged as they were, and serve an older revision as the
// current one. The store reads those logs first and tells the two apart.

// logHeaderSize is what precedes the first entry of a log file (Badger's
// vlogHeaderSize: a key id and an IV, zero without encryption).
const logHeaderSize = 20

// logEntryMaxKey is the largest key Badger's replay reads (safeRead.Entry).
const logEntryMaxKey = 1 << 16

// logSector is the unit a disk writes whole: of a write cut off by a power
// loss, some sectors hold their new bytes and the others their old ones,
// zeros in Badger's preallocated logs (etcd's WAL reads a torn entry so).
const logSector = 512

// logResyncWindow bounds how far past a damaged entry the check looks for a
// sound one when the damaged entry's length cannot be trusted.
const logResyncWindow = 4 << 20

var logCRCTable = crc32.MakeTable(crc32.Castagnoli)

// verifyLogs checks the logs in dir that Badger replays at Open: every
// memtable log and the value log with the highest number.
func verifyLogs(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("store/badger: %w", err)
	}
	var paths []string
	lastVlog, lastFid := "", int64(-1)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, ".mem"):
			paths = append(paths, filepath.Join(dir, name))
		case strings.HasSuffix(name, ".vlog"):
			fid, err := strconv.ParseInt(strings.TrimSuffix(name, ".vlog"), 10, 64)
			if err == nil && fid > lastFid {
				lastVlog, lastFid = filepath.Join(dir, name), fid
			}
		}
	}
	if lastVlog != "" {
		paths = append(paths, lastVlog)
	}
	for _, p := range paths {
		if err := verifyLog(p); err != nil {
			return err
		}
	}
	return nil
}

// verifyLog reads the entries of one log file as Badger's replay does. At
// the first entry that does not read back (a checksum that fails, a header
// that does not decode), it decides, as etcd's WAL does, whether a crash
// left it or damage did:
//
//   - nothing but zeros from there on: the log's end;
//   - a sector of the entry still all zeros: a write a crash cut off
//     before the disk had all of it (never acknowledged: each write group
//     is synced before it is answered);
//   - a header whose key or value runs past the file, or a sound entry
//     after the bad one (the next one in line, or, when the bad entry's
//     length may be wrong, any within logResyncWindow past it that starts
//     a run of sound entries up to the log's end): damage, since a crash
//     cuts off only the last write, and Badger would drop every entry from
//     there on;
//   - otherwise the last entry was cut off mid-copy by a crash.
//
// Damage is a *DamageError naming the file.
func verifyLog(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store/badger: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store/badger: %w", err)
	}
	size := fi.Size()
	if size <= logHeaderSize {
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, logHeaderSize, size-logHeaderSize), 1<<20)
	off := int64(logHeaderSize)
	for {
		n, ok := readLogEntry(r, off, size)
		if ok {
			off += n
			continue
		}
		damaged, why, err := badEntryIsDamage(f, off, size)
		if err != nil {
			return fmt.Errorf("store/badger: read %s: %w", path, err)
		}
		if damaged {
			return &DamageError{File: path, Err: fmt.Errorf("the log entry at offset %d %s; "+
				"Badger would replay the log only up to there, dropping the writes logged after it", off, why)}
		}
		return nil
	}
}

// logEntryHeader is an entry's header as Badger encodes it: meta, user
// meta, then the key length, value length and expiry as uvarints.
type logEntryHeader struct {
	klen, vlen uint64
	hlen       int64
}

// decodeLogHeader decodes the header at the start of b.
func decodeLogHeader(b []byte) (h logEntryHeader, ok bool) {
	if len(b) < 2 {
		return h, false
	}
	i := 2
	var n int
	if h.klen, n = binary.Uvarint(b[i:]); n <= 0 {
		return h, false
	}
	i += n
	if h.vlen, n = binary.Uvarint(b[i:]); n <= 0 {
		return h, false
	}
	i += n
	if _, n = binary.Uvarint(b[i:]); n <= 0 {
		return h, false
	}
	h.hlen = int64(i + n)
	return h, true
}

// maxLogHeader is the longest header: two bytes and three uvarints.
const maxLogHeader = 2 + 3*binary.MaxVarintLen64

// fits tells whether an entry with header h at off lies within size.
func (h logEntryHeader) fits(off, size int64) bool {
	return h.klen <= logEntryMaxKey && h.vlen <= uint64(size) &&
		off+h.hlen+int64(h.klen)+int64(h.vlen)+crc32.Size <= size
}

func (h logEntryHeader) len() int64 { return h.hlen + int64(h.klen) + int64(h.vlen) + crc32.Size }

// readLogEntry reads the entry at off from r, positioned there, and
// reports its length and whether it reads back whole with its checksum.
func readLogEntry(r *bufio.Reader, off, size int64) (int64, bool) {
	hb, _ := r.Peek(maxLogHeader)
	h, ok := decodeLogHeader(hb)
	if !ok || !h.fits(off, size) {
		return 0, false
	}
	crc := crc32.New(logCRCTable)
	if _, err := io.CopyN(crc, r, h.hlen+int64(h.klen)+int64(h.vlen)); err != nil {
		return 0, false
	}
	var sum [crc32.Size]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return 0, false
	}
	if binary.BigEndian.Uint32(sum[:]) != crc.Sum32() {
		return 0, false
	}
	return h.len(), true
}

// badEntryIsDamage decides, for the entry at off that did not read back,
// whether damage or a crash left it (see verifyLog), and says why when
// damage did.
func badEntryIsDamage(f *os.File, off, size int64) (bool, string, error) {
	zero, err := zerosFrom(f, off, size)
	if err != nil || zero {
		return false, "", err
	}
	hb := make([]byte, maxLogHeader)
	n, err := f.ReadAt(hb, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, "", err
	}
	h, ok := decodeLogHeader(hb[:n])
	if !ok || !h.fits(off, size) {
		return true, "has a header that does not decode to an entry within the file", nil
	}
	end := off + h.len()
	if torn, err := hasZeroSector(f, off, end); err != nil || torn {
		return false, "", err // torn by a crash
	}
	// The next entry in line, then any past the bad one within the window
	// (its length may be what was damaged).
	if next, err := soundEntryAt(f, end, size); err != nil || next {
		return next, "fails its checksum", err
	}
	found, err := soundEntryWithin(f, off+1, min(size, end+logResyncWindow), size)
	return found, "fails its checksum", err
}

// hasZeroSector tells whether some part of f's bytes [from, to) that lies
// within one sector is all zeros.
func hasZeroSector(f *os.File, from, to int64) (bool, error) {
	buf := make([]byte, 0, 1<<20)
	for off := from; off < to; {
		// Read up to a sector boundary, so each sector's part is whole.
		n := min(to-off, int64(cap(buf))-off%logSector)
		b := buf[:n]
		if _, err := f.ReadAt(b, off); err != nil {
			return false, err
		}
		for i := int64(0); i < n; {
			m := min(n-i, logSector-(off+i)%logSector)
			if allZero(b[i : i+m]) {
				return true, nil
			}
			i += m
		}
		off += n
	}
	return false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// soundEntryAt tells whether a whole entry with a good checksum lies at
// off: not an all-zero one.
func soundEntryAt(f *os.File, off, size int64) (bool, error) {
	if off >= size {
		return false, nil
	}
	hb := make([]byte, maxLogHeader)
	n, err := f.ReadAt(hb, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	h, ok := decodeLogHeader(hb[:n])
	if !ok || !h.fits(off, size) || h.klen == 0 {
		return false, nil
	}
	b := make([]byte, h.len())
	if _, err := f.ReadAt(b, off); err != nil {
		return false, err
	}
	return entrySound(b), nil
}

// entrySound tells whether b is one entry whose checksum holds.
func entrySound(b []byte) bool {
	body := b[:len(b)-crc32.Size]
	return binary.BigEndian.Uint32(b[len(body):]) == crc32.Checksum(body, logCRCTable)
}

// soundEntryWithin tells whether a sound entry with a key starts anywhere
// in [from, to).
func soundEntryWithin(f *os.File, from, to, size int64) (bool, error) {
	// Entries that start in the window may end past it: read what the
	// largest key and a value of the window's size could span.
	readTo := min(size, to+logResyncWindow)
	if from >= readTo {
		return false, nil
	}
	b := make([]byte, readTo-from)
	if _, err := f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	for i := 0; int64(i) < to-from; i++ {
		h, ok := decodeLogHeader(b[i:])
		if !ok || h.klen == 0 || h.klen > logEntryMaxKey || h.vlen > uint64(len(b)) {
			continue
		}
		end := int64(i) + h.len()
		if end > int64(len(b)) {
			continue
		}
		if !entrySound(b[i:end]) {
			continue
		}
		if ok, err := chainReachesEnd(f, from+int64(i), size); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// chainReachesEnd tells whether the entries from off read back one after
// another up to the log's end, nothing but zeros after the last. Entries a
// damaged one hid do; an entry-shaped run of bytes inside a value, which a
// client may write and a crash may leave in a cut-off last entry, is
// followed by more of that value, not by the log's end, and does not make
// a crash look like damage.
func chainReachesEnd(f *os.File, off, size int64) (bool, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), 1<<20)
	for {
		n, ok := readLogEntry(r, off, size)
		if !ok {
			return zerosFrom(f, off, size)
		}
		off += n
	}
}

// zerosFrom tells whether f holds nothing but zeros from off to size,
// stepping over the holes of a sparse file (Badger preallocates its logs)
// where the filesystem reports them.
func zerosFrom(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, 1<<20)
	for off < size {
		const seekData, seekHole = 3, 4 // SEEK_DATA, SEEK_HOLE
		data, err := f.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			return true, nil // no data past off
		}
		end := size
		if err == nil {
			off = data
			if hole, err := f.Seek(off, seekHole); err == nil && hole < end {
				end = hole
			}
		}
		for off < end {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			if !allZero(buf[:n]) {
				return false, nil
			}
			off += int64(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return true, nil
				}
				return false, err
			}
		}
	}
	return true, nil
}
