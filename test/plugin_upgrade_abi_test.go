package test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// withABIVersion returns wasm with a setpoint_abi_version custom section
// saying version; the section wins over the module's export.
func withABIVersion(wasm []byte, version string) []byte {
	const name = "setpoint_abi_version"
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, version...)
	out := append(append([]byte(nil), wasm...), 0x00, byte(len(body))) // len(body) < 128: one LEB128 byte
	return append(out, body...)
}

// An upgrade to a module of an ABI version the host does not speak is
// refused on the real server, at upload, naming the version; the Plugin
// keeps its module, which goes on admitting and reconciling.
func TestPluginUpgradeRefusesOtherABIVersion(t *testing.T) {
	v1 := wasmModule(t, "lifecyclev1")
	s := testserver.Start(t, testserver.Options{})
	ok(t, s, "apply", "-f", writeFiles(t, map[string]string{"crd.yaml": widgetCRD})+"/crd.yaml")
	ok(t, s, "plugin", "install", "life", "--wasm", v1, "--reconcile", "widgets", "--admit", "widgets", "--operations", "CREATE")
	v1Digest := getPlugin(t, s, "life").LoadedDigest

	abi99 := withABIVersion(builtModule(t, "lifecyclev1"), "99")
	sum := sha256.Sum256(abi99)
	refused := "sha256:" + hex.EncodeToString(sum[:])
	path := filepath.Join(t.TempDir(), "abi99.wasm")
	if err := os.WriteFile(path, abi99, 0o644); err != nil {
		t.Fatal(err)
	}
	// The upload itself refuses the module (every host speaks the same
	// versions), so the Plugin is never pointed at it.
	r := runCLI(t, s, nil, "", "plugin", "upgrade", "life", "--wasm", path)
	t.Logf("exit %d\nstdout:\n%sstderr:\n%s", r.code, r.stdout, r.stderr)
	if r.code != 6 || !strings.Contains(r.stderr, "module refused: host: unsupported ABI version: module speaks ABI version 99") {
		t.Fatalf("upgrade to an ABI version 99 module: exit %d, want 6 and the refusal naming version 99", r.code)
	}
	if st := getPlugin(t, s, "life"); st.LoadedDigest != v1Digest || st.Phase != "Loaded" {
		t.Errorf("status after the refused upgrade: %+v, want %s still loaded", st, v1Digest)
	}
	if code, body, err := s.Do("GET", modulesPath, s.Token, nil); err != nil || code != 200 || strings.Contains(string(body), refused) || !strings.Contains(string(body), v1Digest) {
		t.Errorf("modules after the refused upload: %d %v %s, want %s and not the refused %s", code, err, body, v1Digest, refused)
	}

	// v1 still admits and reconciles.
	_, errOut, err := s.KubectlInput(lifeWidget("denied", true), "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, `admission plugin "life" denied the request: denied by v1`) {
		t.Errorf("a widget labelled deny: %v %s, want v1's denial", err, errOut)
	}
	if out, errOut, err := s.KubectlInput(lifeWidget("kept", false), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	waitWidget(t, s, "kept", "reconciled by v1")
}
