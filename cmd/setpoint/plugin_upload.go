package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/host"
)

func readModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, exitError(exitUsage, fmt.Errorf("--wasm: %w", err))
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		return nil, exitError(exitInvalid, fmt.Errorf("--wasm %s is not a WebAssembly module (no \\0asm header)", path))
	}
	return b, nil
}

// limitsQuery is the spec.limits of the Plugin obj as the modules endpoint
// takes them.
func limitsQuery(obj map[string]any) url.Values {
	q := url.Values{}
	if v, ok, _ := unstructured.NestedInt64(obj, "spec", "limits", "memoryPages"); ok {
		q.Set("memoryPages", strconv.FormatInt(v, 10))
	}
	if v, ok, _ := unstructured.NestedString(obj, "spec", "limits", "callTimeout"); ok {
		q.Set("callTimeout", v)
	}
	if v, ok, _ := unstructured.NestedInt64(obj, "spec", "limits", "poolSize"); ok {
		q.Set("poolSize", strconv.FormatInt(v, 10))
	}
	return q
}

// uploadQuery is the modules endpoint's query for an upload of digest.
func uploadQuery(digest string, limits url.Values) string {
	q := url.Values{"digest": {digest}}
	for k, v := range limits {
		q[k] = v
	}
	return q.Encode()
}

// uploadModule POSTs the module, to be checked with limits (memoryPages,
// callTimeout, poolSize as the modules endpoint takes them), and returns its
// digest. On a terminal, stderr shows a progress bar; on a pipe, nothing.
func uploadModule(ctx context.Context, c *client, path string, wasm []byte, limits url.Values, stderr io.Writer) (string, error) {
	digest := host.Digest(wasm)
	hc, err := rest.HTTPClientFor(c.config)
	if err != nil {
		return "", fmt.Errorf("HTTP client: %w", err)
	}
	var body io.Reader = bytes.NewReader(wasm)
	var bar *progressBar
	if paletteFor(stderr).on {
		bar = &progressBar{w: stderr, label: filepath.Base(path), total: int64(len(wasm)), start: time.Now(),
			full: func() *phaseLine {
				return startPhase(stderr, "checking and compiling module "+shortDigest(digest)+" on the server")
			}}
		body = io.TeeReader(body, bar)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.config.Host, "/")+modulesPath+"?"+uploadQuery(digest, limits), body)
	if err != nil {
		return "", err
	}
	req.ContentLength = int64(len(wasm))
	req.Header.Set("Content-Type", "application/wasm")
	req.Header.Set("User-Agent", c.config.UserAgent)
	resp, err := hc.Do(req)
	if bar != nil {
		bar.finish(err == nil && resp.StatusCode < 300)
	}
	if err != nil {
		return "", c.explain(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		var st metav1.Status
		if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
			return "", c.explain(&apierrors.StatusError{ErrStatus: st})
		}
		return "", fmt.Errorf("upload %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	var info struct{ Digest string }
	if err := json.Unmarshal(b, &info); err != nil || info.Digest != digest {
		return "", fmt.Errorf("upload %s: the server answered digest %q, want %s", path, info.Digest, digest)
	}
	return digest, nil
}

// shortDigest is digest cut to its first 12 hex digits, as a terminal line
// shows it.
func shortDigest(digest string) string {
	if len(digest) > len("sha256:")+12 {
		return digest[:len("sha256:")+12]
	}
	return digest
}

// progressBar draws upload progress on one terminal line. Once every byte
// is sent, full starts the line of what the server does next (it checks and
// compiles the module before it answers).
type progressBar struct {
	w     io.Writer
	label string
	total int64
	start time.Time
	full  func() *phaseLine

	// The transport's goroutine writes; the caller finishes.
	mu       sync.Mutex
	done     int64
	drawn    time.Time
	next     *phaseLine
	finished bool
}

func (p *progressBar) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next != nil || p.finished {
		return len(b), nil
	}
	p.done += int64(len(b))
	if time.Since(p.drawn) >= 100*time.Millisecond || p.done >= p.total {
		p.draw()
	}
	if p.done >= p.total && p.full != nil {
		fmt.Fprintln(p.w)
		p.next = p.full()
	}
	return len(b), nil
}

func (p *progressBar) draw() {
	p.drawn = time.Now()
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	filled := int(frac * width)
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 1e-3)
	fmt.Fprintf(p.w, "\r%s  [%s%s] %3.0f%%  %s / %s  %s/s ", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		frac*100, humanBytes(float64(p.done)), humanBytes(float64(p.total)), humanBytes(rate))
}

// finish ends the bar's line, or the line of the server's check if the
// upload was complete, saying whether the server took the module.
func (p *progressBar) finish(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
	if p.next != nil {
		if ok {
			p.next.end("done")
		} else {
			p.next.end("refused")
		}
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

func humanBytes(n float64) string {
	units := []string{"B", "KB", "MB", "GB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
