// Package writes is the logic of the writer test guests (writer on the
// native ABI, extismwriter on the Extism ABI): handlers that write objects
// through the host's write functions as the call's config says.
//
// Config "op" picks the write: create or update (config "object", the whole
// object), updatestatus, patch or patchstatus (config "patch", a merge patch,
// of the object named by config apiVersion, kind, namespace, name), delete
// (the same name, config "uid" a precondition), or ensure. Config "repeat"
// makes it that many times. A failed write is the handler's error, written
// "<message> (reason <reason>, code <code>)". Reconcile and finalize report
// the written object in their status or events; admit tries the write and
// denies with its error (writes are refused in admission), except with op
// annotate-user, where it allows and annotates the object with the user
// of the request.
//
// ensure is the end-to-end flow: reconciling an object, it creates the Note
// (example.setpoint.dev/v1) "<name>-note" in the object's namespace with
// spec.size from the object's spec.size (or the raw JSON of config
// "noteSize"), or merge-patches spec.size if the Note exists, then
// merge-patches the Note's status.observedSize, and reports status.state
// Ready and status.provision (the Note's name, as the Widget's schema keeps
// it); finalizing the object, it deletes the Note.
package writes

import (
	"fmt"
	"strconv"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// Handlers are the guest's handlers.
var Handlers = plugin.Handlers{Reconcile: reconcile, Admit: admit, Finalize: finalize}

// UserAnnotation is the annotation op annotate-user sets.
const UserAnnotation = "test.setpoint.dev/written-by"

func reconcile(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	if req.Config["op"] == "ensure" {
		return ensure(h, req)
	}
	out, err := do(h, req.Config)
	if err != nil {
		return nil, err
	}
	return &abi.ReconcileResponse{Status: abi.NewObject(nil).Raw("written", out).Bytes()}, nil
}

func finalize(h plugin.Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error) {
	if req.Config["op"] == "ensure" {
		// The object goes: so does its Note.
		if err := plugin.Delete(h, noteOf(abi.RefOf(req.Object))); err != nil && !plugin.IsNotFound(err) {
			return nil, describe(err)
		}
		return &abi.FinalizeResponse{Done: true}, nil
	}
	if _, err := do(h, req.Config); err != nil {
		return nil, err
	}
	return &abi.FinalizeResponse{Done: true}, nil
}

func admit(h plugin.Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error) {
	if req.Config["op"] == "annotate-user" {
		patch := abi.NewObject(nil).Str("op", "add").Str("path", "/metadata/annotations").
			Object("value", func(o *abi.Object) { o.Str(UserAnnotation, req.User.Username) }).Bytes()
		return &abi.AdmissionResponse{Allowed: true, Patch: abi.RawJSON("[" + string(patch) + "]")}, nil
	}
	if _, err := do(h, req.Config); err != nil {
		return &abi.AdmissionResponse{Message: err.Error(), Code: 403}, nil
	}
	return &abi.AdmissionResponse{Allowed: true}, nil
}

// do makes the write the config names, repeat times, and returns the object
// of the last one.
func do(h plugin.Host, cfg map[string]string) (abi.RawJSON, error) {
	n := 1
	if r, err := strconv.Atoi(cfg["repeat"]); err == nil {
		n = r
	}
	ref := abi.ObjectRef{APIVersion: cfg["apiVersion"], Kind: cfg["kind"], Namespace: cfg["namespace"], Name: cfg["name"], UID: cfg["uid"]}
	var out abi.RawJSON
	for range n {
		var err error
		switch cfg["op"] {
		case "create":
			out, err = plugin.Create(h, abi.RawJSON(cfg["object"]))
		case "update":
			out, err = plugin.Update(h, abi.RawJSON(cfg["object"]))
		case "updatestatus":
			out, err = plugin.UpdateStatus(h, abi.RawJSON(cfg["object"]))
		case "patch":
			out, err = plugin.Patch(h, ref, []byte(cfg["patch"]))
		case "patchstatus":
			out, err = plugin.PatchStatus(h, ref, []byte(cfg["patch"]))
		case "delete":
			err = plugin.Delete(h, ref)
		default:
			return nil, fmt.Errorf("unknown op %q", cfg["op"])
		}
		if err != nil {
			return nil, describe(err)
		}
	}
	return out, nil
}

func ensure(h plugin.Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error) {
	ref := abi.RefOf(req.Object)
	note := noteOf(ref)
	size := jsonString(req.Object.String("spec", "size"))
	if raw := req.Config["noteSize"]; raw != "" {
		size = abi.RawJSON(raw)
	}
	obj := abi.NewObject(nil).Str("apiVersion", note.APIVersion).Str("kind", note.Kind).
		Object("metadata", func(o *abi.Object) { o.Str("name", note.Name).Str("namespace", note.Namespace) }).
		Object("spec", func(o *abi.Object) { o.Raw("size", size).Str("widget", ref.Name) }).Bytes()
	_, err := plugin.Create(h, obj)
	if plugin.IsAlreadyExists(err) {
		_, err = plugin.Patch(h, note, abi.NewObject(nil).Object("spec", func(o *abi.Object) { o.Raw("size", size) }).Bytes())
	}
	if err != nil {
		return nil, describe(err)
	}
	out, err := plugin.PatchStatus(h, note, abi.NewObject(nil).Object("status", func(o *abi.Object) { o.Raw("observedSize", size) }).Bytes())
	if err != nil {
		return nil, describe(err)
	}
	st := abi.NewObject(nil).Str("state", "Ready").Str("provision", out.String("metadata", "name"))
	return &abi.ReconcileResponse{Status: st.Bytes()}, nil
}

// noteOf names the Note of the object ref names.
func noteOf(ref abi.ObjectRef) abi.ObjectRef {
	return abi.ObjectRef{APIVersion: "example.setpoint.dev/v1", Kind: "Note", Namespace: ref.Namespace, Name: ref.Name + "-note"}
}

// jsonString is s as a JSON string.
func jsonString(s string) abi.RawJSON {
	v, _ := abi.NewObject(nil).Str("s", s).Bytes().Get("s")
	return v
}

// describe writes a failed write's reason and code into its message.
func describe(err error) error {
	var code int
	if we, ok := err.(*plugin.WriteError); ok {
		code = we.Code
	}
	return fmt.Errorf("%w (reason %s, code %d)", err, plugin.ReasonOf(err), code)
}
