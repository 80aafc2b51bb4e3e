package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/client-go/dynamic"
)

func init() { subcommands = append(subcommands, newApplyCommand) }

// lastAppliedAnnotation holds the configuration apply last wrote; it is the
// one kubectl uses, so that setpoint and kubectl apply can take turns.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type applyOptions struct {
	client    clientOptions
	files     []string
	recursive bool
	timeout   time.Duration
	dryRun    string
	// serverSide applies with server-side apply under fieldManager, taking
	// the fields other managers own with forceConflicts.
	serverSide     bool
	fieldManager   string
	forceConflicts bool
	// validate is --validate: strict, warn or ignore ("" leaves it to the
	// server, as the examples loader does).
	validate string
}

// fieldValidation is the server's fieldValidation for --validate, as
// kubectl maps it (true is strict, false is ignore).
func (o *applyOptions) fieldValidation() (string, error) {
	switch o.validate {
	case "":
		return "", nil
	case "strict", "true":
		return metav1.FieldValidationStrict, nil
	case "warn":
		return metav1.FieldValidationWarn, nil
	case "ignore", "false":
		return metav1.FieldValidationIgnore, nil
	}
	return "", usageError("--validate %q: want strict, warn or ignore", o.validate)
}

func newApplyCommand() *cobra.Command {
	o := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-R]",
		Short: "Create or update objects from YAML or JSON manifests",
		Long: `Create or update the objects in manifests: files, directories (their .yaml, .yml
and .json files; -R descends into subdirectories) or - for standard input. A file
may hold several YAML documents separated by ---, a stream of JSON objects, or a
List.

CustomResourceDefinitions are applied first, and apply waits until the server
serves their kinds (the CRD is Established) before applying the objects that
need them; Namespaces come next, then the rest in file order.

Applying is idempotent: an object that already matches its manifest is left
alone ("unchanged"), so re-applying the same file writes nothing. Changes are
computed as kubectl apply does (a three-way merge with the configuration last
applied, kept in the kubectl.kubernetes.io/last-applied-configuration
annotation), so fields set by others are kept and fields removed from the
manifest are removed from the object. status is never applied: it belongs to
the controllers.

With --server-side the server merges each manifest itself (server-side
apply, as kubectl apply --server-side): the fields a manifest sets are owned
by --field-manager, a field another manager owns is a conflict that names
both (--force-conflicts takes it over), and fields a manager stops applying
go when nobody else owns them. No last-applied annotation is kept.

Every object is tried; apply exits non-zero if any failed.

` + exitCodeHelp,
		Example: `  # Register the Widget kind and create a widget
  setpoint apply -f examples/widget/crd.yaml -f examples/widget/widget.yaml

  # Apply a directory tree
  setpoint apply -R -f manifests/

  # Apply from standard input
  cat widget.yaml | setpoint apply -f -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runApply(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addClientFlags(cmd, &o.client)
	addNamespaceFlag(cmd, &o.client)
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	cmd.Flags().BoolVarP(&o.recursive, "recursive", "R", false, "also read the manifests in subdirectories of a -f directory")
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for a CustomResourceDefinition to be served")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", "none, or server: the server validates every write in full and stores nothing")
	cmd.Flags().BoolVar(&o.serverSide, "server-side", false, "let the server merge the manifests (server-side apply), recording what each field manager owns")
	cmd.Flags().StringVar(&o.fieldManager, "field-manager", "setpoint", "with --server-side, the name the applied fields are owned under")
	cmd.Flags().BoolVar(&o.forceConflicts, "force-conflicts", false, "with --server-side, take over fields other managers own instead of failing")
	cmd.Flags().StringVar(&o.validate, "validate", "strict", "how the server treats fields the kind does not define: strict (refuse the object), warn (drop them with a warning) or ignore (drop them)")
	return cmd
}

// applyRank orders manifests: kinds first, then namespaces, then plugins,
// then everything else, in file order within each rank.
func applyRank(u *unstructured.Unstructured) int {
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return 0
	case gvk.Group == "" && gvk.Kind == "Namespace":
		return 1
	case gvk.Kind == "Plugin":
		return 2
	}
	return 3
}

func runApply(ctx context.Context, o *applyOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	dryRun, suffix, err := parseDryRun(o.dryRun)
	if err != nil {
		return err
	}
	if !o.serverSide && o.forceConflicts {
		return usageError("--force-conflicts needs --server-side")
	}
	if _, err := o.fieldValidation(); err != nil {
		return err
	}
	ms, err := readManifests(o.files, o.recursive, stdin)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return usageError("the manifests hold no objects")
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	sort.SliceStable(ms, func(i, j int) bool { return applyRank(ms[i].obj) < applyRank(ms[j].obj) })

	pal, errPal := paletteFor(stdout), paletteFor(stderr)
	var first error
	failed := 0
	fail := func(m manifest, err error) {
		failed++
		if first == nil {
			first = err
		}
		fmt.Fprintf(stderr, "%s %s: %v\n", errPal.red("error:"), m.where(), err)
	}
	var crds []string
	for i, m := range ms {
		res, err := applyOne(ctx, c, m, dryRun, o)
		if code := exitCode(err); code == exitUnreachable || code == exitDenied {
			return err // every other object would fail the same way
		}
		if err != nil {
			fail(m, err)
		} else {
			word := res.result
			switch word {
			case "created":
				word = pal.green(word)
			case "configured":
				word = pal.yellow(word)
			}
			fmt.Fprintf(stdout, "%s %s%s\n", res.name, word, suffix)
			if applyRank(m.obj) == 0 && dryRun == nil {
				crds = append(crds, m.obj.GetName())
			}
		}
		// Once the last CRD is applied, wait until its kinds are served.
		if applyRank(m.obj) == 0 && (i+1 == len(ms) || applyRank(ms[i+1].obj) != 0) && len(crds) > 0 {
			if err := waitEstablished(ctx, c, crds, o.timeout); err != nil {
				fail(m, err)
			}
			c.mapper.Reset()
		}
	}
	if first != nil {
		if failed == 1 {
			return exitError(exitCode(first), silent{fmt.Errorf("1 of %d objects failed", len(ms))})
		}
		return exitError(exitCode(first), silent{fmt.Errorf("%d of %d objects failed", failed, len(ms))})
	}
	return nil
}

// parseDryRun reads --dry-run: the server's dryRun parameter and what to
// print after each result.
func parseDryRun(s string) ([]string, string, error) {
	switch s {
	case "", "none":
		return nil, "", nil
	case "server":
		return []string{metav1.DryRunAll}, " (server dry run)", nil
	}
	return nil, "", usageError("--dry-run %q: want none or server", s)
}

// silent is an error main prints as a summary only; the details were printed
// already.
type silent struct{ error }

func (s silent) Unwrap() error { return s.error }

type applyResult struct {
	name   string // TYPE/NAME
	result string // created, configured or unchanged
}

// systemFields are metadata the server owns; a manifest that carries them
// (output of get -o yaml, say) must not make every apply look like a change.
var systemFields = []string{"uid", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}

// applyOne creates or updates m's object; with dryRun ([]string{"All"}) the
// server validates the write and stores nothing.
func applyOne(ctx context.Context, c *client, m manifest, dryRun []string, o *applyOptions) (applyResult, error) {
	gvk := m.obj.GroupVersionKind()
	r, err := c.resourceForKind(gvk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return applyResult{}, exitError(exitNotFound, fmt.Errorf("the server does not serve kind %q in apiVersion %q: apply its CustomResourceDefinition first, or check apiVersion and kind", gvk.Kind, gvk.GroupVersion()))
		}
		return applyResult{}, c.explain(err)
	}
	obj := m.obj.DeepCopy()
	ns := ""
	if r.namespaced {
		ns = obj.GetNamespace()
		if ns == "" {
			ns = c.namespace
		} else if c.explicitNS && ns != c.namespace {
			return applyResult{}, usageError("the object's namespace %q differs from --namespace %q", ns, c.namespace)
		}
		obj.SetNamespace(ns)
	} else {
		obj.SetNamespace("")
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	for _, f := range systemFields {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	fv, err := o.fieldValidation()
	if err != nil {
		return applyResult{}, err
	}
	ri := c.resourceInterface(r, ns)
	if o.serverSide {
		return applyServerSide(ctx, c, ri, r.objectName(obj.GetName()), obj, dryRun, o)
	}

	// What this apply means, recorded on the object for the next one.
	// Encoded as kubectl encodes it (annotations present, even empty), so
	// that kubectl apply and setpoint apply see each other's as their own.
	annotations := obj.GetAnnotations()
	delete(annotations, lastAppliedAnnotation)
	anyAnnotations := make(map[string]any, len(annotations))
	for k, v := range annotations {
		anyAnnotations[k] = v
	}
	if err := unstructured.SetNestedField(obj.Object, anyAnnotations, "metadata", "annotations"); err != nil {
		return applyResult{}, fmt.Errorf("encode: %w", err)
	}
	applied, err := json.Marshal(obj.Object)
	if err != nil {
		return applyResult{}, fmt.Errorf("encode: %w", err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[lastAppliedAnnotation] = string(applied) + "\n"
	obj.SetAnnotations(annotations)

	if obj.GetName() == "" { // generateName: always a new object
		created, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: "setpoint", DryRun: dryRun, FieldValidation: fv})
		if err != nil {
			return applyResult{}, c.explain(err)
		}
		return applyResult{name: r.objectName(created.GetName()), result: "created"}, nil
	}
	name := r.objectName(obj.GetName())
	pinned := obj.GetResourceVersion() != "" // the manifest carries a precondition
	for attempt := 0; ; attempt++ {
		cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj.SetResourceVersion("")
			_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: "setpoint", DryRun: dryRun, FieldValidation: fv})
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue
			}
			if err != nil {
				return applyResult{}, c.explain(err)
			}
			return applyResult{name: name, result: "created"}, nil
		}
		if err != nil {
			return applyResult{}, c.explain(err)
		}
		patch, err := threeWayPatch(obj, cur, pinned)
		if err != nil {
			return applyResult{}, err
		}
		if patch == nil {
			return applyResult{name: name, result: "unchanged"}, nil
		}
		_, err = ri.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "setpoint", DryRun: dryRun, FieldValidation: fv})
		if apierrors.IsConflict(err) && !pinned && attempt < 3 {
			continue // someone wrote in between: merge again with what is there now
		}
		if err != nil {
			return applyResult{}, c.explain(err)
		}
		return applyResult{name: name, result: "configured"}, nil
	}
}

// applyServerSide applies obj with server-side apply and tells, from its
// resourceVersion before and after, whether it created, changed or left the
// object alone.
func applyServerSide(ctx context.Context, c *client, ri dynamic.ResourceInterface, name string, obj *unstructured.Unstructured, dryRun []string, o *applyOptions) (applyResult, error) {
	if obj.GetName() == "" {
		return applyResult{}, usageError("server-side apply needs metadata.name (generateName is for create)")
	}
	cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return applyResult{}, c.explain(err)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return applyResult{}, fmt.Errorf("encode: %w", err)
	}
	force := o.forceConflicts
	fv, err := o.fieldValidation()
	if err != nil {
		return applyResult{}, err
	}
	out, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: o.fieldManager, Force: &force, DryRun: dryRun, FieldValidation: fv})
	if err != nil {
		if isFieldManagerConflict(err) {
			return applyResult{}, fmt.Errorf("%w\n(--force-conflicts takes these fields over; or leave them out of the manifest to keep their owners)", c.explain(err))
		}
		return applyResult{}, c.explain(err)
	}
	switch {
	case cur == nil:
		return applyResult{name: name, result: "created"}, nil
	case dryRun == nil && out.GetResourceVersion() == cur.GetResourceVersion():
		return applyResult{name: name, result: "unchanged"}, nil
	case dryRun != nil && sameButManagedFields(out, cur):
		// A dry run stores nothing, so the resourceVersion tells nothing.
		return applyResult{name: name, result: "unchanged"}, nil
	}
	return applyResult{name: name, result: "configured"}, nil
}

// sameButManagedFields tells whether a and b are equal but for their
// managedFields (whose timestamps a dry run renews).
func sameButManagedFields(a, b *unstructured.Unstructured) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	a.SetManagedFields(nil)
	b.SetManagedFields(nil)
	return equality.Semantic.DeepEqual(a.Object, b.Object)
}

// threeWayPatch is the merge patch that takes cur to modified, deleting what
// the last apply set and modified no longer has; nil when there is nothing to
// change. The patch carries cur's resourceVersion, so a write in between
// gives a conflict instead of being overwritten.
func threeWayPatch(modified, cur *unstructured.Unstructured, pinned bool) ([]byte, error) {
	original := []byte(cur.GetAnnotations()[lastAppliedAnnotation])
	modJSON, err := json.Marshal(modified.Object)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	curJSON, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modJSON, curJSON)
	if err != nil {
		return nil, fmt.Errorf("compute the change: %w", err)
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("compute the change: %w", err)
	}
	if md, ok := p["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		if len(md) == 0 {
			delete(p, "metadata")
		}
	}
	if len(p) == 0 {
		return nil, nil
	}
	rv := cur.GetResourceVersion()
	if pinned {
		rv = modified.GetResourceVersion()
	}
	if err := unstructured.SetNestedField(p, rv, "metadata", "resourceVersion"); err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// waitEstablished waits until every named CRD has the Established
// condition, for at most timeout.
func waitEstablished(ctx context.Context, c *client, names []string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ri := c.dynamic.Resource(crdGVR)
	for _, name := range names {
		for {
			crd, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return c.explain(err)
			}
			if err == nil && established(crd) {
				break
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return fmt.Errorf("CustomResourceDefinition %s not established within %v", name, timeout)
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
