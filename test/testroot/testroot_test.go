package testroot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindFrom: the environment wins, then the nearest go.mod of the main
// module, whatever comments or quotes it holds, passing over sdk/'s.
func TestFindFrom(t *testing.T) {
	tmp := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("repo/go.mod", "// the main module\nmodule github.com/setpoint-dev/setpoint // ours\n\ngo 1.26\n")
	write("repo/test/bench/api/api_test.go", "package api\n")
	write("repo/sdk/go.mod", "module github.com/setpoint-dev/setpoint/sdk\n")
	write("repo/sdk/abi/abi.go", "package abi\n")
	write("quoted/go.mod", "module \"github.com/setpoint-dev/setpoint\"\n")
	write("plain/go.mod", "module github.com/setpoint-dev/setpoint\n\ngo 1.26\n")
	write("plain/host/hosttest/x.go", "package hosttest\n")
	write("other/go.mod", "module example.com/setpoint\n")
	write("other/pkg/x.go", "package pkg\n")
	write("bundle/bin/setpoint", "")
	repo := filepath.Join(tmp, "repo")

	for _, tc := range []struct {
		name, env, dir string
		want           string // "" when an error is wanted
		wantErr        string
	}{
		{name: "module root itself", dir: "repo", want: repo},
		{name: "package directory", dir: "repo/test/bench/api", want: repo},
		{name: "nested module skipped", dir: "repo/sdk/abi", want: repo},
		{name: "quoted module path", dir: "quoted", want: filepath.Join(tmp, "quoted")},
		{name: "module directive on the first line", dir: "plain/host/hosttest", want: filepath.Join(tmp, "plain")},
		{name: "another module", dir: "other/pkg", wantErr: "set SETPOINT_ROOT"},
		{name: "env wins", env: filepath.Join(tmp, "bundle"), dir: "repo/test", want: filepath.Join(tmp, "bundle")},
		{name: "env not a directory", env: filepath.Join(tmp, "bundle/bin/setpoint"), dir: "repo", wantErr: "is not a directory"},
		{name: "env missing", env: filepath.Join(tmp, "nowhere"), dir: "repo", wantErr: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindFrom(tc.env, filepath.Join(tmp, tc.dir))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FindFrom = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FindFrom = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestFindInThisCheckout is the lookup go test's working directory gives:
// the checkout's root, which holds go.mod and cmd/setpoint.
func TestFindInThisCheckout(t *testing.T) {
	t.Setenv(Env, "")
	root, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "setpoint")); err != nil {
		t.Fatalf("Find = %q: %v", root, err)
	}
}
