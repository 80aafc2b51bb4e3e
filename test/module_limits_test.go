package test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// nestedModule builds a module of funcs functions, each nesting depth
// blocks of opcode op (0x02 block, 0x03 loop).
func nestedModule(funcs, depth int, op byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body []byte) {
		b.WriteByte(id)
		b.Write(binary.AppendUvarint(nil, uint64(len(body))))
		b.Write(body)
	}
	sec(1, []byte{1, 0x60, 0, 0})
	fs := binary.AppendUvarint(nil, uint64(funcs))
	fs = append(fs, make([]byte, funcs)...)
	sec(3, fs)
	sec(5, []byte{1, 0, 1})
	fn := []byte{0}
	for range depth {
		fn = append(fn, op, 0x40)
	}
	fn = append(fn, bytes.Repeat([]byte{0x0b}, depth+1)...)
	code := binary.AppendUvarint(nil, uint64(funcs))
	for range funcs {
		code = binary.AppendUvarint(code, uint64(len(fn)))
		code = append(code, fn...)
	}
	sec(10, code)
	return b.Bytes()
}

// rssKiB is a process's resident set size.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestHostileModuleUploads uploads the modules that took the server down
// (a million nested loops: over 6 GB; 200,000 nested blocks: minutes of
// CPU) and limits past the server's budget: each is refused with 422 in
// well under a second, the server's memory stays where it was, and it goes
// on serving.
func TestHostileModuleUploads(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	base := rssKiB(t, s.Pid())
	for _, tt := range []struct {
		name, query string
		wasm        []byte
		msg         string
	}{
		{"a million nested loops", "", nestedModule(1, 1_000_000, 0x03), "structural limit"},
		{"a million loops in small functions", "", nestedModule(1_000, 1_000, 0x03), "nesting work"},
		{"200,000 nested blocks", "", nestedModule(1, 200_000, 0x02), "nested deeper than 2000"},
		{"a call timeout past the budget", "?callTimeout=1000h", builtModule(t, "requiredlabels"), "--plugin-max-call-timeout"},
		{"a pool past the budget", "?poolSize=256", builtModule(t, "requiredlabels"), "--plugin-max-pool-size"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Now()
			r := upload(t, s, tt.wasm, tt.query, "application/wasm")
			took := time.Since(t0)
			rss := rssKiB(t, s.Pid())
			t.Logf("%d-byte upload answered %d in %v; server RSS %d MiB (was %d MiB): %s", len(tt.wasm), r.code, took, rss>>10, base>>10, r.msg)
			if r.code != http.StatusUnprocessableEntity || !strings.Contains(r.msg, tt.msg) {
				t.Fatalf("upload: %d %q, want 422 naming %q", r.code, r.msg, tt.msg)
			}
			if took > 5*time.Second {
				t.Errorf("the refusal took %v", took)
			}
			if rss > base+256<<10 {
				t.Errorf("server RSS grew from %d to %d MiB", base>>10, rss>>10)
			}
		})
	}
	// The server goes on serving.
	if code, body, err := s.Do("GET", "/api/v1/namespaces", s.Token, nil); err != nil || code != http.StatusOK {
		t.Fatalf("list namespaces after the uploads: %d %v %s", code, err, body)
	}
}

// TestPluginOverBudget: a Plugin whose limits pass the server's budget is
// not loaded, and its status says which budget.
func TestPluginOverBudget(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Args: []string{"--plugin-max-call-timeout", "5s"}})
	d := mustUpload(t, s, builtModule(t, "requiredlabels"))
	applyPlugin(t, s, pluginManifest("slowpoke", d, "  limits:\n    callTimeout: 1000h\n"))
	st := waitPlugin(t, s, "slowpoke", time.Minute, func(st pluginStatus) bool {
		_, _, msg := st.condition("Loaded")
		return strings.Contains(msg, "--plugin-max-call-timeout")
	})
	_, _, msg := st.condition("Loaded")
	t.Log(msg)
	if !strings.Contains(msg, "maximum call timeout of 5s") {
		t.Fatalf("Loaded condition: %q", msg)
	}
}
