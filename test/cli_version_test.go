package test

import (
	"debug/buildinfo"
	"encoding/json"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestCLIVersion checks that `setpoint version` reports the client's build
// stamp (commit, tree state, time) as the server reports its own, and that
// client and server, one binary, agree.
func TestCLIVersion(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	bin, err := testserver.Binary()
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	stamp := map[string]string{}
	for _, st := range info.Settings {
		stamp[st.Key] = st.Value
	}
	out := ok(t, s, "version", "-o", "json")
	type v struct{ GitVersion, GitCommit, GitTreeState, BuildDate, GoVersion string }
	var doc struct {
		Client *v `json:"clientVersion"`
		Server *v `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Client == nil || doc.Server == nil {
		t.Fatalf("setpoint version -o json (%v):\n%s", err, out)
	}
	c := doc.Client
	if c.GitCommit != stamp["vcs.revision"] || c.BuildDate != stamp["vcs.time"] || c.GoVersion != info.GoVersion ||
		(stamp["vcs.revision"] != "" && c.GitTreeState != map[string]string{"true": "dirty", "false": "clean"}[stamp["vcs.modified"]]) {
		t.Errorf("client version %+v, want the binary's stamp %v", *c, stamp)
	}
	if c.GitCommit != doc.Server.GitCommit || c.BuildDate != doc.Server.BuildDate {
		t.Errorf("client %+v and server %+v, one binary, differ", *c, *doc.Server)
	}
	text := ok(t, s, "version")
	if rev := stamp["vcs.revision"]; rev != "" && strings.Count(text, rev) != 2 {
		t.Errorf("setpoint version does not show commit %s for client and server:\n%s", rev, text)
	}
	if !strings.Contains(text, "Client Version: ") || !strings.Contains(text, "Server Version: ") {
		t.Errorf("setpoint version:\n%s", text)
	}
}
