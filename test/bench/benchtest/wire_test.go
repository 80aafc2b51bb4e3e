package benchtest

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 40)
	r := bufio.NewReaderSize(strings.NewReader("short\n"+long+"\nlast"), 16)
	for _, want := range []string{"short\n", long + "\n"} {
		line, err := ReadLine(r)
		if err != nil || string(line) != want {
			t.Fatalf("ReadLine: %q %v, want %q", line, err, want)
		}
	}
	if line, err := ReadLine(r); err != io.EOF || string(line) != "last" {
		t.Fatalf("ReadLine at the end: %q %v, want \"last\" and EOF", line, err)
	}
}

func TestStamp(t *testing.T) {
	key := []byte(`"note":"`)
	at := time.Unix(0, 1764150000123456789)
	if got, ok := Stamp([]byte(`{"object":{"note":"1764150000123456789","x":1}}`), key); !ok || !got.Equal(at) {
		t.Errorf("Stamp: %v %v, want %v", got, ok, at)
	}
	for _, msg := range []string{`{"note":"12a"}`, `{"note":""}`, `{"other":"1"}`, `{"note":"1`} {
		if got, ok := Stamp([]byte(msg), key); ok {
			t.Errorf("Stamp(%s): %v, want none", msg, got)
		}
	}
}

func TestListMeta(t *testing.T) {
	body := []byte(`{"kind":"List","items":[{"metadata":{"resourceVersion":"9"}}],"metadata":{"resourceVersion":"42","continue":"c"}}`)
	for field, want := range map[string]string{"resourceVersion": "42", "continue": "c", "absent": ""} {
		if got, err := ListMeta(body, field); err != nil || got != want {
			t.Errorf("ListMeta %s: %q %v, want %q", field, got, err, want)
		}
	}
	if _, err := ListMeta([]byte(`{"metadata":`), "continue"); err == nil {
		t.Error("ListMeta of a cut body: no error")
	}
}
