package main

import (
	"context"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/host/hosttest"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// withVersionSection returns wasm declaring ABI version v in a custom
// section, which the host reads before the module's own export.
func withVersionSection(wasm []byte, v string) []byte {
	name := abi.ExportVersion
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, v...)
	out := append([]byte{}, wasm...)
	out = append(out, 0, byte(len(payload)))
	return append(out, payload...)
}

// On the real host, a module that traps in its init, speaks another ABI
// version, or is staged and discarded never replaces the version serving:
// calls keep reaching it.
func TestStageNeverReplacesServingVersion(t *testing.T) {
	h := hosttest.NewHost(t, host.Options{})
	reg := host.NewRegistry(h)
	t.Cleanup(func() { _ = reg.Close() })
	a := hostAdapter{h: h, reg: reg, checked: &checkedVersion{}}
	ctx := context.Background()
	v1 := hosttest.Module(t, "lifecyclev1")

	c, err := a.Stage(ctx, "p", v1, host.Digest(v1), plugins.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Exports(); got != (plugins.Exports{Reconcile: true, Admit: true, Finalize: true, Preemption: "loop-checks"}) {
		t.Fatalf("v1 exports %+v", got)
	}
	if reg.Get("p") != nil {
		t.Fatal("a staged version serves before Commit")
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	served := func(t *testing.T) {
		t.Helper()
		if got := reg.Get("p").Digest(); got != host.Digest(v1) {
			t.Fatalf("p is served by %s, want v1 %s", got, host.Digest(v1))
		}
		resp, err := reg.Handle("p").Admit(ctx, &abi.AdmissionRequest{Operation: abi.Create,
			Object: abi.RawJSON(`{"metadata":{"name":"x","labels":{"deny":"yes"}}}`)})
		if err != nil || resp.Allowed || resp.Message != "denied by v1" {
			t.Fatalf("admit: %+v %v, want v1's denial", resp, err)
		}
	}
	served(t)

	for _, tc := range []struct{ name, says string }{
		{"trap in init", "inittrap: init fails on purpose"},
		{"ABI version mismatch", "ABI version 99"},
		{"over the memory cap", "memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm, cfg := hosttest.Module(t, "inittrap"), plugins.Config{}
			switch tc.name {
			case "ABI version mismatch":
				wasm = withVersionSection(hosttest.Module(t, "lifecyclenoadmit"), "99")
			case "over the memory cap":
				wasm, cfg = hosttest.Module(t, "lifecyclegrow"), plugins.Config{MemoryPages: 512}
			}
			if c, err := a.Stage(ctx, "p", wasm, host.Digest(wasm), cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
				if c != nil {
					c.Discard()
				}
				t.Fatalf("Stage: %v, want an error saying %q", err, tc.says)
			}
			served(t)
		})
	}

	t.Run("discarded", func(t *testing.T) {
		wasm := hosttest.Module(t, "lifecyclenoadmit")
		c, err := a.Stage(ctx, "p", wasm, host.Digest(wasm), plugins.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Exports().Admit {
			t.Fatal("lifecyclenoadmit exports admit")
		}
		c.Discard()
		c.Discard()
		if err := c.Commit(); err == nil {
			t.Fatal("Commit after Discard succeeded")
		}
		served(t)
	})
}
