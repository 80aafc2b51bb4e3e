package badger

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logEntry encodes one entry as Badger writes it to its logs: meta, user
// meta, the key length, value length and expiry as uvarints, the key, the
// value, and a CRC-32C of all of it, big-endian.
func logEntry(key, value string) []byte {
	b := []byte{0, 0}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = binary.AppendUvarint(b, 0)
	b = append(b, key...)
	b = append(b, value...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, logCRCTable))
}

// writeLog writes a log of the given bytes after the log header,
// preallocated with zeros to 1 MiB as Badger's are.
func writeLog(t *testing.T, body []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "00001.mem")
	b := make([]byte, 1<<20)
	copy(b[logHeaderSize:], body)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLogCheckCrashInsideCraftedValue: the last entry of a log, cut off by
// a crash partway through its value (no sector of it all zeros), holds in
// the part written an entry-shaped run of bytes with a sound checksum, as a
// client could write into a ConfigMap. A crash, not damage: Open must not
// refuse a healthy store for it. The same run of bytes followed by sound
// entries up to the log's end, after a damaged entry, is damage.
func TestLogCheckCrashInsideCraftedValue(t *testing.T) {
	first := logEntry("/configmaps/default/a", `{"data":{"k":"v"}}`)
	fake := logEntry("/configmaps/default/fake", `{"x":1}`)
	value := `{"data":{"k":"` + string(fake) + strings.Repeat("y", 300) + `"}}`
	last := logEntry("/configmaps/default/b", value)
	cut := len(last) - 200 // the crash stopped the copy 200 bytes short
	body := append(append([]byte{}, first...), last[:cut]...)
	if err := verifyLog(writeLog(t, body)); err != nil {
		t.Fatalf("a last entry cut off by a crash was taken for damage: %v", err)
	}

	// Damage: the first entry's value flipped, sound entries after it.
	damaged := append([]byte{}, first...)
	damaged[len(damaged)-8] ^= 0xff
	body = append(append(append([]byte{}, damaged...), logEntry("/configmaps/default/c", `{}`)...), logEntry("/configmaps/default/d", `{}`)...)
	var de *DamageError
	if err := verifyLog(writeLog(t, body)); !errors.As(err, &de) {
		t.Fatalf("an entry damaged before sound ones: %v, want a DamageError", err)
	}
}
