package main

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
)

func TestExplain(t *testing.T) {
	c := &client{config: &rest.Config{Host: "https://127.0.0.1:6443"}}
	gr := schema.GroupResource{Group: "example.setpoint.dev", Resource: "widgets"}
	tests := []struct {
		name  string
		err   error
		code  int
		wants []string
		lacks []string
	}{
		{name: "conflict", err: apierrors.NewConflict(gr, "a", errors.New("stale")), code: exitConflict, wants: []string{"changed since you read it"}},
		{name: "server-side apply conflict is no stale read", err: applyConflict(), code: exitConflict,
			wants: []string{`Apply failed with 1 conflict: conflict with "setpoint" using example.setpoint.dev/v1: .spec.size`}, lacks: []string{"changed since you read it", "resourceVersion"}},
		{name: "already exists", err: apierrors.NewAlreadyExists(gr, "a"), code: exitConflict, wants: []string{"already exists"}},
		{name: "not found", err: apierrors.NewNotFound(gr, "a"), code: exitNotFound, wants: []string{`"a" not found`}},
		{name: "unauthorized", err: apierrors.NewUnauthorized("no"), code: exitDenied, wants: []string{"401", "token"}},
		{name: "forbidden", err: apierrors.NewForbidden(gr, "a", errors.New("no")), code: exitDenied, wants: []string{"forbidden"}},
		{name: "invalid lists each field", err: apierrors.NewInvalid(schema.GroupKind{Group: "example.setpoint.dev", Kind: "Widget"}, "a", field.ErrorList{
			field.NotSupported(field.NewPath("spec", "size"), "huge", []string{"small", "medium", "large"}),
			field.Required(field.NewPath("spec", "name"), ""),
		}), code: exitInvalid, wants: []string{`Widget.example.setpoint.dev "a" is invalid:`, "\n  - spec.size: Unsupported value", "\n  - spec.name: Required value"}},
		{name: "other", err: errors.New("boom"), code: exitFailure, wants: []string{"boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.explain(tt.err)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit code %d, want %d (%v)", got, tt.code, err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			for _, l := range tt.lacks {
				if strings.Contains(err.Error(), l) {
					t.Errorf("%q says %q", err, l)
				}
			}
		})
	}
}

// applyConflict is the 409 a server-side apply gets for a field another
// manager owns, as kube-apiserver words it.
func applyConflict() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
		Message: `Apply failed with 1 conflict: conflict with "setpoint" using example.setpoint.dev/v1: .spec.size`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict,
			Message: `conflict with "setpoint" using example.setpoint.dev/v1`, Field: ".spec.size"}}},
	}}
}

func TestExitCodeOfUsageErrors(t *testing.T) {
	for _, msg := range []string{`unknown command "x" for "setpoint"`, "unknown flag: --x", "required flag(s) \"data-dir\" not set"} {
		if got := exitCode(errors.New(msg)); got != exitUsage {
			t.Errorf("%q: exit %d, want %d", msg, got, exitUsage)
		}
	}
	if exitCode(nil) != exitOK {
		t.Error("nil is not success")
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"widgts", "widgets", 1},
		{"widgets", "widgets", 0},
		{"", "ns", 2},
		{"gett", "get", 1},
		{"kitten", "sitting", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
