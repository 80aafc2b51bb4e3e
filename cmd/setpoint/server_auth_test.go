package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/apiserver/serving"
)

// TestAuthFlagsValidate: the authentication flags fail with messages that
// name the flag, the file and the line, before the server starts.
func TestAuthFlagsValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.csv", "tok,alice,1,\"dev,ops\"\n")
	bad := write("bad.csv", "tok,alice,1\n\nsecret-x,bob\n")
	notPEM := write("ca.txt", "not a certificate")
	tests := []struct {
		name string
		a    authFlags
		want string // "" for valid
	}{
		{name: "none", a: authFlags{}},
		{name: "token file", a: authFlags{tokenAuthFile: good}},
		{name: "missing token file", a: authFlags{tokenAuthFile: filepath.Join(dir, "nope.csv")}, want: "--token-auth-file: open "},
		{name: "bad token file line", a: authFlags{tokenAuthFile: bad}, want: "bad.csv: serving: bad token file: line 3: want at least 3 fields"},
		{name: "client CA not PEM", a: authFlags{clientCAFile: notPEM}, want: "--client-ca-file " + notPEM + ": the file holds no PEM certificate"},
		{name: "missing client CA", a: authFlags{clientCAFile: filepath.Join(dir, "nope.crt")}, want: "--client-ca-file: open "},
		{name: "oidc over http", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "http://idp.example.com", ClientID: "setpoint"}}, want: `--oidc-issuer-url "http://idp.example.com": want an https URL`},
		{name: "oidc without client id", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "https://idp.example.com"}}, want: "--oidc-issuer-url and --oidc-client-id go together"},
		{name: "oidc groups claim alone", a: authFlags{oidc: serving.OIDCOptions{GroupsClaim: "groups"}}, want: "go together"},
		{name: "oidc", a: authFlags{oidc: serving.OIDCOptions{IssuerURL: "https://idp.example.com", ClientID: "setpoint"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret-x") {
				t.Errorf("the error quotes a token: %v", err)
			}
		})
	}
}
