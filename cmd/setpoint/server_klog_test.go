package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestKlogGoesToTheServerLog checks that what Kubernetes' libraries log
// through klog is written by the server's logger, in its format and at
// its level, with component=k8s, credentials taken out, and klog's V(1)
// and finer lines never written.
func TestKlogGoesToTheServerLog(t *testing.T) {
	const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	routeKlog(log)
	klog.ErrorS(errors.New("verify "+jwt+": expired"), "oidc authenticator: token", "issuer", "https://issuer.example", "token", "s3cret-value")
	klog.Infof("retrying with header Authorization: Bearer %s", "opaque-bearer-token")
	klog.Warning("informer resync")
	klog.V(1).Info("verbose line")
	klog.V(6).InfoS("GET https://x/api 200", "body", "secret data")

	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %q (%v)", l, err)
		}
		msg, _ := m["msg"].(string)
		lines[msg] = m
	}
	out := buf.String()
	for _, secret := range []string{jwt, "s3cret-value", "opaque-bearer-token", "secret data"} {
		if strings.Contains(out, secret) {
			t.Errorf("log holds %q:\n%s", secret, out)
		}
	}
	if strings.Contains(out, "verbose line") || strings.Contains(out, "GET https://x/api") {
		t.Errorf("klog's verbose lines were written:\n%s", out)
	}
	e := lines["oidc authenticator: token"]
	if e == nil || e["level"] != "ERROR" || e["component"] != "k8s" || e["issuer"] != "https://issuer.example" ||
		e["token"] != redacted || e["err"] != "verify "+redacted+": expired" {
		t.Errorf("the error line: %v\nlog:\n%s", e, out)
	}
	if i := lines["retrying with header Authorization: Bearer "+redacted]; i == nil || i["level"] != "INFO" || i["component"] != "k8s" {
		t.Errorf("the info line: %v\nlog:\n%s", i, out)
	}
	if w := lines["informer resync"]; w == nil || w["component"] != "k8s" {
		t.Errorf("the warning line: %v\nlog:\n%s", w, out)
	}

	// --log-level warn drops klog's info lines, keeps its errors; text
	// format.
	buf.Reset()
	log, err = newLogger(&buf, "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	routeKlog(log)
	klog.Info("an info line")
	klog.Error("an error line")
	out = buf.String()
	if strings.Contains(out, "an info line") || !strings.Contains(out, `level=ERROR msg="an error line" component=k8s`) {
		t.Errorf("at --log-level warn, text:\n%s", out)
	}
}
