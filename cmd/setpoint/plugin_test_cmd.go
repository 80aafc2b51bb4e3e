package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/controller"
	"github.com/setpoint-dev/setpoint/host"
	"github.com/setpoint-dev/setpoint/sdk/abi"
)

type testOptions struct {
	local     localOptions
	crds      []string
	object    string
	old       string
	children  string
	admission string
	config    map[string]string
	attempt   int
}

func newPluginTestCommand() *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test FILE.wasm --crd crd.yaml --object obj.yaml [--children DIR] [--admission create|update|delete [--old old.yaml]]",
		Short: "Run a built module offline and print what the server would store",
		Long: `Run the module under the same host the server runs, with no server, and print
as YAML what the server would store:

  object       the object as the plugin receives it: checked against the
               CRD's schema, pruned and defaulted as the server does
  admission    with --admission: the verdict (allowed, code, message,
               warnings), the patch and the object it yields, checked
               against the schema again
  reconcile    the status the object would get (the plugin's, with
               observedGeneration and the Ready condition the engine
               adds), the child writes (create, update or delete, with the
               namespace, name and controller ownerReference the engine
               sets), requeueAfter and the events

The CRD is checked as the server checks one. --children is a file or a
directory of the observed children (each taken as controlled by the object);
get and list host calls are served from them and the object. Repeat --crd
for the kinds of children: the children the plugin desires are then checked
against their schemas too, and take their kind's scope (otherwise the
object's). With --admission create or update, an
admitted object is then reconciled. CEL validation rules are not run.

The command exits 1 when the plugin fails (a trap, a timeout, an error it
reports) or returns what the server would refuse (a status or child the
schema or the engine rejects, a patch that does not apply); the report is
printed all the same. An admission denial is a verdict, not a failure. Input
that does not parse exits 6.

` + exitCodeHelp,
		Example: `  setpoint plugin test bin/wasm/widget-plugin.wasm --crd examples/widget/crd.yaml --object examples/widget/widget.yaml
  setpoint plugin test bin/gadget.wasm --crd crd.yaml --object example.yaml --admission create`,
		Args: rangeArgs(1, 1, "FILE.wasm --crd crd.yaml --object obj.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginTest(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.local.addFlags(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&o.crds, "crd", nil, "the kind's CustomResourceDefinition (required); repeat it for the kinds of children, which are then checked too")
	f.StringVar(&o.object, "object", "", "the object (required)")
	f.StringVar(&o.old, "old", "", "the stored object an UPDATE or DELETE replaces (default: --object)")
	f.StringVar(&o.children, "children", "", "a file or directory of the object's observed children")
	f.StringVar(&o.admission, "admission", "", "run admission for the operation create, update or delete")
	f.StringToStringVar(&o.config, "config", nil, "the plugin's configuration, KEY=VALUE (repeatable)")
	f.IntVar(&o.attempt, "attempt", 0, "the request's attempt count")
	return cmd
}

// served is a kind as a CRD serves it, for checking objects offline.
type servedKind struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func loadCRD(path string) (*servedKind, error) {
	ms, err := readManifests([]string{path}, false, nil)
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 || ms[0].obj.GetKind() != "CustomResourceDefinition" {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: want one CustomResourceDefinition", path))
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(ms[0].obj.Object, crd, true); err != nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: %w", ms[0].where(), err))
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	in := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, in, nil); err != nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: %w", path, err))
	}
	if errs := extvalidation.ValidateCustomResourceDefinition(context.Background(), in); len(errs) > 0 {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: the server would refuse this CRD: %v", path, errs.ToAggregate()))
	}
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil || val == nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: no schema for version %s", path, version))
	}
	ival := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, ival, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(ival.OpenAPIV3Schema)
	if err != nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: %w", path, err))
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(ival.OpenAPIV3Schema)
	if err != nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: %w", path, err))
	}
	return &servedKind{
		gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind},
		resource:   crd.Spec.Names.Plural,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: s,
		validator:  validator,
	}, nil
}

// prepare prunes and defaults obj as the server does on a write and fills
// the metadata the server sets.
func (k *servedKind) prepare(obj *unstructured.Unstructured) error {
	if obj.GroupVersionKind() != k.gvk {
		return exitError(exitInvalid, fmt.Errorf("the object is a %s, the CRD serves %s", obj.GroupVersionKind(), k.gvk))
	}
	if obj.GetName() == "" {
		return exitError(exitInvalid, errors.New("the object has no metadata.name"))
	}
	structuralpruning.Prune(obj.Object, k.structural, true)
	structuraldefaulting.Default(obj.Object, k.structural)
	if k.namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if obj.GetUID() == "" {
		obj.SetUID(uuid.NewUUID())
	}
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	if obj.GetResourceVersion() == "" {
		obj.SetResourceVersion("1")
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.Now())
	}
	return nil
}

// validate reports what the server's schema check refuses in obj.
func (k *servedKind) validate(obj *unstructured.Unstructured) error {
	if errs := apiservervalidation.ValidateCustomResource(nil, obj.Object, k.validator); len(errs) > 0 {
		return fmt.Errorf("%s %q is invalid: %v", k.gvk.Kind, obj.GetName(), errs.ToAggregate())
	}
	return nil
}

func readOne(path, what string) (*unstructured.Unstructured, error) {
	ms, err := readManifests([]string{path}, false, nil)
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: want one %s, found %d objects", path, what, len(ms)))
	}
	return ms[0].obj, nil
}

type testReport struct {
	Object    map[string]any   `json:"object"`
	Admission *admissionReport `json:"admission,omitempty"`
	Reconcile *reconcileReport `json:"reconcile,omitempty"`
}

type admissionReport struct {
	Operation string         `json:"operation"`
	Allowed   bool           `json:"allowed"`
	Code      int            `json:"code,omitempty"`
	Message   string         `json:"message,omitempty"`
	Warnings  []string       `json:"warnings,omitempty"`
	Patch     any            `json:"patch,omitempty"`
	Object    map[string]any `json:"object,omitempty"`
	Error     string         `json:"error,omitempty"`
}

type reconcileReport struct {
	Status       map[string]any `json:"status"`
	Children     []childWrite   `json:"children,omitempty"`
	RequeueAfter string         `json:"requeueAfter,omitempty"`
	Events       []eventReport  `json:"events,omitempty"`
	Error        string         `json:"error,omitempty"`
}

type childWrite struct {
	Op     string         `json:"op"`
	Object map[string]any `json:"object"`
}

type eventReport struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func runPluginTest(ctx context.Context, o *testOptions, wasm string, stdout, stderr io.Writer) error {
	if len(o.crds) == 0 || o.object == "" {
		return usageError("--crd and --object are required")
	}
	op := abi.Operation(strings.ToUpper(o.admission))
	switch op {
	case "", abi.Create, abi.Update, abi.Delete:
	default:
		return usageError("--admission %q: want create, update or delete", o.admission)
	}
	obj, err := readOne(o.object, "object")
	if err != nil {
		return err
	}
	kinds := map[schema.GroupKind]*servedKind{}
	var kind *servedKind
	for _, path := range o.crds {
		k, err := loadCRD(path)
		if err != nil {
			return err
		}
		kinds[k.gvk.GroupKind()] = k
		if k.gvk.GroupKind() == obj.GroupVersionKind().GroupKind() {
			kind = k
		}
	}
	if kind == nil {
		return exitError(exitInvalid, fmt.Errorf("the object is a %s; no --crd serves that kind", obj.GroupVersionKind().GroupKind()))
	}
	if err := kind.prepare(obj); err != nil {
		return err
	}
	if err := kind.validate(obj); err != nil {
		return exitError(exitInvalid, fmt.Errorf("%s: the server would refuse the object: %w", o.object, err))
	}
	objects := &memObjects{objects: []map[string]any{obj.Object}}
	var observed []*unstructured.Unstructured
	if o.children != "" {
		ms, err := readManifests([]string{o.children}, false, nil)
		if err != nil {
			return err
		}
		for _, m := range ms {
			c := m.obj
			if kind.namespaced && c.GetNamespace() == "" {
				c.SetNamespace(obj.GetNamespace())
			}
			if c.GetUID() == "" {
				c.SetUID(uuid.NewUUID())
			}
			if _, ok := controllerRefOf(c); !ok {
				t := true
				c.SetOwnerReferences(append(c.GetOwnerReferences(), metav1.OwnerReference{APIVersion: obj.GetAPIVersion(),
					Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(), Controller: &t, BlockOwnerDeletion: &t}))
			}
			observed = append(observed, c)
			objects.objects = append(objects.objects, c.Object)
		}
	}

	p, events, closeFn, err := localModule(ctx, &o.local, wasm, objects, stderr)
	if err != nil {
		return err
	}
	defer closeFn()

	report := &testReport{Object: obj.Object}
	var failure error
	if op != "" {
		var admitted *unstructured.Unstructured
		report.Admission, admitted, failure = runTestAdmission(ctx, o, kind, p, op, obj)
		if admitted != nil && op != abi.Delete && p.HasReconcile() {
			obj = admitted
		} else {
			obj = nil
		}
	} else if !p.HasReconcile() {
		return usageError("%s has no reconcile export (it exports: %s): pass --admission to test admission", wasm, exports(p))
	}
	if obj != nil && failure == nil {
		report.Reconcile, failure = runTestReconcile(ctx, o, kind, kinds, p, obj, observed)
	}
	for _, ev := range events.list() {
		if report.Reconcile != nil {
			report.Reconcile.Events = append(report.Reconcile.Events, eventReport(ev))
		}
	}
	out, err := yaml.Marshal(report)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	return failure
}

func controllerRefOf(obj *unstructured.Unstructured) (metav1.OwnerReference, bool) {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

func runTestAdmission(ctx context.Context, o *testOptions, kind *servedKind, p *host.Plugin, op abi.Operation,
	obj *unstructured.Unstructured) (*admissionReport, *unstructured.Unstructured, error) {
	if !p.HasAdmit() {
		return nil, nil, usageError("the module has no admit export (it exports: %s)", exports(p))
	}
	req := &abi.AdmissionRequest{
		UID:       string(uuid.NewUUID()),
		Kind:      abi.GroupVersionKind{Group: kind.gvk.Group, Version: kind.gvk.Version, Kind: kind.gvk.Kind},
		Resource:  kind.resource,
		Namespace: obj.GetNamespace(),
		Name:      obj.GetName(),
		Operation: op,
		User:      abi.UserInfo{Username: "admin", Groups: []string{"system:masters", "system:authenticated"}},
		Config:    o.config,
	}
	var err error
	if op != abi.Delete {
		if req.Object, err = json.Marshal(obj.Object); err != nil {
			return nil, nil, err
		}
	}
	if op != abi.Create {
		old := obj
		if o.old != "" {
			if old, err = readOne(o.old, "old object"); err != nil {
				return nil, nil, err
			}
			if err := kind.prepare(old); err != nil {
				return nil, nil, err
			}
		}
		if req.OldObject, err = json.Marshal(old.Object); err != nil {
			return nil, nil, err
		}
	}
	rep := &admissionReport{Operation: string(op)}
	resp, err := p.Admit(ctx, req)
	if err != nil {
		rep.Error = err.Error()
		return rep, nil, fmt.Errorf("admit failed: %w (with failurePolicy Fail the server refuses the request, with Ignore it lets it through)", err)
	}
	rep.Allowed, rep.Code, rep.Message, rep.Warnings = resp.Allowed, resp.Code, resp.Message, resp.Warnings
	if !resp.Allowed {
		if rep.Code == 0 {
			rep.Code = 403
		}
		return rep, nil, nil
	}
	if op == abi.Delete {
		return rep, nil, nil
	}
	admitted := obj
	switch {
	case len(resp.Patch) > 0:
		var patch any
		_ = json.Unmarshal(resp.Patch, &patch)
		rep.Patch = patch
		pt, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			rep.Error = "the patch is not a JSON patch: " + err.Error()
			return rep, nil, errors.New("admit: " + rep.Error)
		}
		out, err := pt.Apply(req.Object)
		if err != nil {
			rep.Error = "the patch does not apply: " + err.Error()
			return rep, nil, errors.New("admit: " + rep.Error)
		}
		admitted = &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(out, &admitted.Object); err != nil {
			return rep, nil, err
		}
	case len(resp.Object) > 0:
		admitted = &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(resp.Object, &admitted.Object); err != nil {
			rep.Error = "the mutated object is not a JSON object: " + err.Error()
			return rep, nil, errors.New("admit: " + rep.Error)
		}
	}
	if admitted != obj {
		structuralpruning.Prune(admitted.Object, kind.structural, true)
		structuraldefaulting.Default(admitted.Object, kind.structural)
		rep.Object = admitted.Object
		if err := kind.validate(admitted); err != nil {
			rep.Error = "the server would refuse the mutated object: " + err.Error()
			return rep, nil, errors.New("admit: " + rep.Error)
		}
	}
	return rep, admitted, nil
}

func runTestReconcile(ctx context.Context, o *testOptions, kind *servedKind, kinds map[schema.GroupKind]*servedKind, p *host.Plugin, obj *unstructured.Unstructured,
	observed []*unstructured.Unstructured) (*reconcileReport, error) {
	req := &abi.ReconcileRequest{Attempt: o.attempt, Config: o.config, Children: map[string][]abi.RawJSON{}}
	var err error
	if req.Object, err = json.Marshal(obj.Object); err != nil {
		return nil, err
	}
	owns := map[schema.GroupKind]controller.Kind{}
	addKind := func(gvk schema.GroupVersionKind) {
		if _, ok := owns[gvk.GroupKind()]; !ok {
			k := controller.Kind{Resource: gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"),
				Kind: gvk.Kind, Namespaced: kind.namespaced}
			if ck, ok := kinds[gvk.GroupKind()]; ok {
				k.Resource = ck.gvk.GroupVersion().WithResource(ck.resource)
				k.Namespaced = ck.namespaced
			}
			owns[gvk.GroupKind()] = k
		}
	}
	for _, c := range observed {
		gvk := c.GroupVersionKind()
		addKind(gvk)
		key := gvk.Kind
		if gvk.Group != "" {
			key += "." + gvk.Group
		}
		b, err := json.Marshal(c.Object)
		if err != nil {
			return nil, err
		}
		req.Children[key] = append(req.Children[key], b)
	}
	resp, callErr := p.Reconcile(ctx, req)
	rep := &reconcileReport{}
	if callErr == nil {
		for _, c := range resp.Children {
			var m struct{ APIVersion, Kind string }
			if json.Unmarshal(c, &m) == nil && m.Kind != "" {
				addKind(schema.FromAPIVersionAndKind(m.APIVersion, m.Kind))
			}
		}
		if resp.RequeueAfter > 0 {
			rep.RequeueAfter = resp.RequeueAfter.String()
		}
		for _, ev := range resp.Events {
			rep.Events = append(rep.Events, eventReport(ev))
		}
		rep.Error = resp.Error
	}
	ownList := make([]controller.Kind, 0, len(owns))
	for _, k := range owns {
		ownList = append(ownList, k)
	}
	pv := controller.PreviewReconcile(obj, kind.namespaced, ownList, observed, resp, callErr, time.Now())
	rep.Status = pv.Status
	var childErr error
	for _, w := range pv.Writes {
		rep.Children = append(rep.Children, childWrite{Op: w.Op, Object: w.Object.Object})
		ck, ok := kinds[w.Object.GroupVersionKind().GroupKind()]
		if !ok || w.Op == "delete" || childErr != nil {
			continue
		}
		c := w.Object.DeepCopy()
		structuralpruning.Prune(c.Object, ck.structural, true)
		structuraldefaulting.Default(c.Object, ck.structural)
		if err := ck.validate(c); err != nil {
			childErr = fmt.Errorf("the server would refuse the child: %w", err)
		}
	}
	if pv.Failure != "" {
		return rep, errors.New("reconcile: " + pv.Failure)
	}
	if childErr != nil {
		rep.Error = childErr.Error()
		return rep, errors.New("reconcile: " + rep.Error)
	}
	withStatus := obj.DeepCopy()
	withStatus.Object["status"] = pv.Status
	if err := kind.validate(withStatus); err != nil {
		rep.Error = "the server would refuse the status: " + err.Error()
		return rep, errors.New("reconcile: " + rep.Error)
	}
	return rep, nil
}
