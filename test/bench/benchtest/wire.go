package benchtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"time"
)

// ReadLine reads one newline-terminated line of a chunked watch from r
// without copying it; a line longer than r's buffer is returned whole, in
// a copy. The line is valid until the next read.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Copied before the next read refills the buffer line points into.
		line = append([]byte(nil), line...)
		var rest []byte
		rest, err = r.ReadBytes('\n')
		line = append(line, rest...)
	}
	return line, err
}

// Stamp finds key (the bytes `"name":"` of a string field) in msg and
// reads the decimal Unix time in nanoseconds that the string holds, as the
// benchmarks' writers stamp objects; false when msg has none. It does not
// allocate.
func Stamp(msg, key []byte) (time.Time, bool) {
	i := bytes.Index(msg, key)
	if i < 0 {
		return time.Time{}, false
	}
	rest := msg[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return time.Time{}, false
	}
	var ns int64
	for _, c := range rest[:j] {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		ns = ns*10 + int64(c-'0')
	}
	return time.Unix(0, ns), true
}

// ListMeta reads one string field of a list's metadata (resourceVersion,
// continue), decoding no further than the metadata; "" when it has none.
func ListMeta(body []byte, field string) (string, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	if _, err := d.Token(); err != nil { // {
		return "", err
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return "", err
		}
		if k != "metadata" {
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			return "", err
		}
		s, _ := m[field].(string)
		return s, nil
	}
	return "", nil
}
