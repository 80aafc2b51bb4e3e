package badger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/setpoint-dev/setpoint/store"
)

// Key spaces; see the package comment.
const (
	objectSpace  = 'o'
	historySpace = 'h'
)

var (
	historyPrefix = []byte{historySpace}
	metaRevKey    = []byte("m/rev")
	metaCompact   = []byte("m/compact")
)

func objectKey(key string) []byte {
	b := make([]byte, 1+len(key))
	b[0] = objectSpace
	copy(b[1:], key)
	return b
}

func objectPrefix(prefix string) []byte { return objectKey(prefix) }

func historyKey(lastRev int64) []byte {
	b := make([]byte, 9)
	b[0] = historySpace
	binary.BigEndian.PutUint64(b[1:], uint64(lastRev))
	return b
}

func historyKeyRev(k []byte) (int64, bool) {
	if len(k) != 9 || k[0] != historySpace {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:])), true
}

func encodeRev(rev int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(rev)) }

func decodeRev(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("store/badger: bad revision value of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// encodeObject is the object index value: uvarint(createRev) then the document.
func encodeObject(createRev int64, value []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(value))
	b = binary.AppendUvarint(b, uint64(createRev))
	return append(b, value...)
}

func decodeObject(b []byte) (createRev int64, value []byte, err error) {
	c, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errors.New("store/badger: corrupt object value")
	}
	return int64(c), b[n:], nil
}

// A record is the history of one group commit: for each event in revision
// order, type byte, uvarint createRev, uvarint key length, key, uvarint value
// length, value. A delete has an empty value; its document is the previous one.
func appendRecordEvent(b []byte, ev *store.Event) []byte {
	b = append(b, byte(ev.Type))
	b = binary.AppendUvarint(b, uint64(ev.Object.CreateRevision))
	b = binary.AppendUvarint(b, uint64(len(ev.Object.Key)))
	b = append(b, ev.Object.Key...)
	var v []byte
	if ev.Type != store.Deleted {
		v = ev.Object.Value
	}
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// recordEvent is one decoded record event. Value aliases the record buffer.
type recordEvent struct {
	typ       store.EventType
	rev       int64
	createRev int64
	key       string
	value     []byte
}

var errCorruptRecord = errors.New("store/badger: corrupt history record")

// decodeRecord decodes a record whose last revision is lastRev.
func decodeRecord(b []byte, lastRev int64) ([]recordEvent, error) {
	var out []recordEvent
	for len(b) > 0 {
		var ev recordEvent
		ev.typ = store.EventType(b[0])
		if ev.typ < store.Added || ev.typ > store.Deleted {
			return nil, errCorruptRecord
		}
		b = b[1:]
		c, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errCorruptRecord
		}
		ev.createRev = int64(c)
		b = b[n:]
		kl, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < kl {
			return nil, errCorruptRecord
		}
		ev.key = string(b[n : n+int(kl)])
		b = b[n+int(kl):]
		vl, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < vl {
			return nil, errCorruptRecord
		}
		ev.value = b[n : n+int(vl) : n+int(vl)]
		b = b[n+int(vl):]
		out = append(out, ev)
	}
	if len(out) == 0 {
		return nil, errCorruptRecord
	}
	first := lastRev - int64(len(out)) + 1
	for i := range out {
		out[i].rev = first + int64(i)
	}
	return out, nil
}
