package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// recordingAuditor notes each audited write as one line.
type recordingAuditor struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordingAuditor) AuditWrite(_ context.Context, attrs authorizer.Attributes, body runtime.Object) func(runtime.Object, error) {
	return func(out runtime.Object, err error) {
		code := int32(200)
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			code = st.Status().Code
		} else if err != nil {
			code = 500
		}
		name := attrs.GetName()
		if m, merr := meta.Accessor(out); name == "" && out != nil && merr == nil {
			name = m.GetName()
		}
		user := ""
		if u := attrs.GetUser(); u != nil {
			user = u.GetName()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lines = append(r.lines, fmt.Sprintf("%s %s/%s %s/%s %s body=%t %d",
			attrs.GetVerb(), attrs.GetResource(), attrs.GetSubresource(), attrs.GetNamespace(), name, user, body != nil, code))
	}
}

func (r *recordingAuditor) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func TestPluginUser(t *testing.T) {
	u := PluginUser("widget")
	want := &user.DefaultInfo{Name: "system:setpoint:plugin:widget", Groups: []string{"system:setpoint:plugins", "system:authenticated"}}
	if d := cmp.Diff(want, u); d != "" {
		t.Errorf("PluginUser (-want +got):\n%s", d)
	}
	if name, ok := pluginOf(u); !ok || name != "widget" {
		t.Errorf("pluginOf(PluginUser(widget)) = %q, %t", name, ok)
	}
	if _, ok := pluginOf(&user.DefaultInfo{Name: "system:setpoint:plugin:widget"}); ok {
		t.Error("a user named like a plugin but outside its group is taken for the plugin")
	}
}

// TestPluginWritesAudited checks that every write a plugin makes through
// host calls and events is audited as the plugin's user, with its outcome.
func TestPluginWritesAudited(t *testing.T) {
	svc := newWriteService(t)
	o := NewObjects(svc, quietLogger())
	rec := &recordingAuditor{}
	o.AuditWrites(rec)
	ctx := context.Background()
	const u = "system:setpoint:plugin:p"

	steps := []struct {
		fn   string
		req  abi.WriteRequest
		want string
	}{
		{abi.HostCreate, abi.WriteRequest{Object: note("n1", "small", "")}, "create notes/ default/n1 " + u + " body=true 200"},
		{abi.HostCreate, abi.WriteRequest{Object: note("n1", "small", "")}, "create notes/ default/ " + u + " body=true 409"},
		{abi.HostPatch, withPatch(noteRef, "status", `{"status":{"state":"Ready"}}`), "patch notes/status default/n1 " + u + " body=true 200"},
		{abi.HostDelete, noteRef, "delete notes/ default/n1 " + u + " body=true 200"},
	}
	for _, st := range steps {
		o.WriteObject(ctx, "p", st.fn, st.req)
		got := rec.take()
		// A create's name comes from its outcome; the recorder shows it.
		if len(got) != 1 || got[0] != st.want {
			t.Errorf("%s: audited %q, want %q", st.fn, got, st.want)
		}
	}
	if err := o.RecordEvent(ctx, "p", abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: "default", Name: "n1"},
		abi.Event{Reason: "Made", Message: "made it"}); err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 1 || got[0][:len("create events/ default/n1.")] != "create events/ default/n1." {
		t.Errorf("event: audited %q", got)
	}
}

// TestAuditedClient checks the controller's writes of a reconcile binding.
func TestAuditedClient(t *testing.T) {
	svc := newWriteService(t)
	rec := &recordingAuditor{}
	c := auditClient(rec, svc)
	ctx := request.WithUser(context.Background(), PluginUser("w"))
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(note("c1", "small", "")); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace("default")
	created, err := c.Create(ctx, noteGVR, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateStatus(ctx, noteGVR, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, noteGVR, "default", "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kinds.EventResource, "default", "missing", metav1.DeleteOptions{}); err == nil {
		t.Fatal("deleted a missing event")
	}
	const u = "system:setpoint:plugin:w"
	want := []string{
		"create notes/ default/c1 " + u + " body=true 200",
		"update notes/status default/c1 " + u + " body=true 200",
		"delete notes/ default/c1 " + u + " body=true 200",
		"delete events/ default/missing " + u + " body=true 404",
	}
	if d := cmp.Diff(want, rec.take()); d != "" {
		t.Errorf("audited (-want +got):\n%s", d)
	}
	if auditClient(nil, svc) != svc {
		t.Error("a nil Auditor wraps the client")
	}
}
