package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/setpoint-dev/setpoint/store/badger"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/kinds"
	"github.com/setpoint-dev/setpoint/store"
)

// The engine's JSON entry points (CreateJSON, UpdateJSON, UpdateStatusJSON,
// ListJSON) answer with stored documents whose resourceVersion is spliced in
// rather than with the object encoded again. The tests below drive random
// objects, with a fixed seed, through each and its object twin (Create,
// Update, UpdateStatus, List) on two services that see the same writes, and
// require the same stored bytes, the same objects and the same errors, and
// JSON that is the object's.

// twinServices are two services on stores of their own with one clock, so
// that the same writes store the same documents up to their uids.
func twinServices(t *testing.T) (a, b *Service) {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	open := func() *Service {
		db, err := badger.Open(t.TempDir(), badger.Options{})
		if err != nil {
			t.Fatalf("open badger: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := New(context.Background(), Options{Store: db, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		def, err := os.ReadFile("../examples/widget/crd.yaml")
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(def, &crd.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(context.Background(), kinds.CRDResource, crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget CRD: %v", err)
		}
		return s
	}
	return open(), open()
}

// randomText is a string with the characters JSON escapes, non-ASCII ones
// and the key the splice looks for.
func randomText(rng *rand.Rand) string {
	parts := []string{"a", "Z", "0", " ", `"`, `\`, "/", "<", ">", "&", "é", "日本", "\u2028", "\x01", "\t", `"resourceVersion"`, `"metadata":{`, "}"}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// randomWidget is a Widget, usually valid: now and then its name, namespace,
// size, display name or a label is one the engine refuses.
func randomWidget(rng *rand.Rand, i int) *unstructured.Unstructured {
	sizes := []string{"small", "medium", "large", "huge"}
	name := "w" + randomText(rng)
	if rng.IntN(10) > 0 {
		name = fmt.Sprintf("w%d", i)
	}
	display := randomText(rng)
	if rng.IntN(10) > 0 {
		display = "d" + display
	}
	if rng.IntN(20) == 0 {
		display = strings.Repeat("x", 64) // beyond the CEL rule's 63
	}
	obj := map[string]any{
		"apiVersion": "example.setpoint.dev/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"name": display, "size": sizes[rng.IntN(len(sizes))]},
	}
	u := &unstructured.Unstructured{Object: obj}
	if rng.IntN(20) == 0 {
		u.SetNamespace("absent")
	}
	if n := rng.IntN(4); n > 0 {
		labels := map[string]string{}
		for j := range n {
			labels[fmt.Sprintf("k%d", j)] = []string{"a", "b", "not valid!"}[rng.IntN(3)]
		}
		u.SetLabels(labels)
	}
	if n := rng.IntN(3); n > 0 {
		ann := map[string]string{}
		for j := range n {
			ann[fmt.Sprintf("note%d", j)] = randomText(rng)
		}
		u.SetAnnotations(ann)
	}
	if rng.IntN(4) == 0 {
		obj["spec"].(map[string]any)["unknown"] = randomText(rng) // pruned
	}
	if rng.IntN(4) == 0 {
		obj["status"] = map[string]any{"state": randomText(rng)}
	}
	if rng.IntN(8) == 0 {
		u.SetUID("client-set")
		u.SetResourceVersion("12")
	}
	return u
}

// sameOutcome fails unless the two results of twin calls are the same: both
// errors alike, or both objects equal once the uid is masked.
func sameOutcome(t *testing.T, what string, a, b *unstructured.Unstructured, errA, errB error) bool {
	t.Helper()
	if (errA == nil) != (errB == nil) {
		t.Fatalf("%s: errors %v and %v", what, errA, errB)
	}
	if errA != nil {
		if diff := gocmp.Diff(errorOf(errA), errorOf(errB)); diff != "" {
			t.Fatalf("%s: errors differ (-object path +JSON path):\n%s", what, diff)
		}
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	a.SetUID("")
	b.SetUID("")
	if diff := gocmp.Diff(a.Object, b.Object); diff != "" {
		t.Fatalf("%s: objects differ (-object path +JSON path):\n%s", what, diff)
	}
	return true
}

// errorOf is what a client sees of err: its status with the causes sorted,
// and without the message when there are causes, which validation reports
// in an order of its own.
func errorOf(err error) metav1.Status {
	st := apierrors.APIStatus(nil)
	if !errors.As(err, &st) {
		return metav1.Status{Message: err.Error()}
	}
	status := st.Status()
	s := *status.DeepCopy()
	if s.Details != nil && len(s.Details.Causes) > 0 {
		s.Message = ""
		slices.SortFunc(s.Details.Causes, func(a, b metav1.StatusCause) int {
			return cmp.Compare(a.Field+a.Message, b.Field+b.Message)
		})
	}
	return s
}

// sameStored fails unless both services store the same document for obj,
// up to the uids.
func sameStored(t *testing.T, what string, a, b *Service, obj *unstructured.Unstructured, uidA, uidB string) {
	t.Helper()
	ctx := context.Background()
	sv, ok := a.reg.Get(widgets)
	if !ok {
		t.Fatal("widgets not served")
	}
	k := key(sv, obj.GetNamespace(), obj.GetName())
	ka, errA := a.store.Get(ctx, k, store.GetOptions{})
	kb, errB := b.store.Get(ctx, k, store.GetOptions{})
	if errA != nil || errB != nil {
		t.Fatalf("%s: read stored: %v, %v", what, errA, errB)
	}
	va := bytes.ReplaceAll(ka.Value, []byte(uidA), []byte("UID"))
	vb := bytes.ReplaceAll(kb.Value, []byte(uidB), []byte("UID"))
	if !bytes.Equal(va, vb) || ka.ModRevision != kb.ModRevision {
		t.Fatalf("%s: stored\n%s at %d\n%s at %d", what, va, ka.ModRevision, vb, kb.ModRevision)
	}
}

// isObjectJSON fails unless body is nil (nothing written) or the JSON of obj.
func isObjectJSON(t *testing.T, what string, body []byte, obj *unstructured.Unstructured) {
	t.Helper()
	if body == nil {
		return
	}
	if !json.Valid(body) {
		t.Fatalf("%s: invalid JSON %s", what, body)
	}
	sameJSON(t, what, body, obj)
}

func TestJSONWritesMatchObjectWritesRandomized(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(14, 2026))
	a, b := twinServices(t)
	created := 0
	for i := range 150 {
		in := randomWidget(rng, i)
		var opts metav1.CreateOptions
		if rng.IntN(6) == 0 {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		before := in.DeepCopy()
		outA, errA := a.Create(ctx, widgets, in, opts)
		if diff := gocmp.Diff(before.Object, in.Object); diff != "" {
			t.Fatalf("create %d: Create changed its argument:\n%s", i, diff)
		}
		// CreateJSON, the API's create, refuses a resourceVersion as
		// kube-apiserver does, where Create drops it: compare the rest.
		inB := in.DeepCopy()
		inB.SetResourceVersion("")
		outB, body, errB := b.CreateJSON(ctx, widgets, inB, opts)
		if !sameOutcome(t, fmt.Sprintf("create %d", i), outA, outB, errA, errB) {
			continue
		}
		isObjectJSON(t, fmt.Sprintf("create %d", i), body, outB)
		if len(opts.DryRun) > 0 {
			if body != nil {
				t.Fatalf("create %d: dry run returned JSON", i)
			}
			continue
		}
		created++
		sameStored(t, fmt.Sprintf("create %d", i), a, b, outA, string(outA.GetUID()), string(outB.GetUID()))
		uidA, uidB := string(outA.GetUID()), string(outB.GetUID())

		// Updates of the stored object: the spec, labels, the status.
		for j := range 3 {
			upd := randomWidget(rng, i)
			updA, updB := outA.DeepCopy(), outB.DeepCopy()
			for _, u := range []*unstructured.Unstructured{updA, updB} {
				u.Object["spec"] = runtimeCopy(upd.Object["spec"])
				u.SetLabels(upd.GetLabels())
				if st, ok := upd.Object["status"]; ok {
					u.Object["status"] = runtimeCopy(st)
				}
				if rng.IntN(8) == 0 {
					u.SetResourceVersion("1") // stale: a conflict
				}
			}
			updB.SetResourceVersion(updA.GetResourceVersion())
			var uopts metav1.UpdateOptions
			if rng.IntN(6) == 0 {
				uopts.DryRun = []string{metav1.DryRunAll}
			}
			what := fmt.Sprintf("update %d.%d", i, j)
			var gotA, gotB *unstructured.Unstructured
			if rng.IntN(3) == 0 {
				what = fmt.Sprintf("status update %d.%d", i, j)
				gotA, errA = a.UpdateStatus(ctx, widgets, updA, uopts)
				gotB, body, errB = b.UpdateStatusJSON(ctx, widgets, updB, uopts)
			} else {
				gotA, errA = a.Update(ctx, widgets, updA, uopts)
				gotB, body, errB = b.UpdateJSON(ctx, widgets, updB, uopts)
			}
			if !sameOutcome(t, what, gotA, gotB, errA, errB) {
				continue
			}
			isObjectJSON(t, what, body, gotB)
			sameStored(t, what, a, b, gotA, uidA, uidB)
			if len(uopts.DryRun) == 0 {
				outA, outB = gotA, gotB
			}
		}
	}
	if created < 50 {
		t.Fatalf("only %d of 150 random creates succeeded: the generator is off", created)
	}
}

func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

func TestListJSONMatchesListRandomized(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(14, 7))
	s := newService(t)
	for i := range 60 {
		in := randomWidget(rng, i)
		in.SetNamespace("default")
		_, _ = s.Create(ctx, widgets, in, metav1.CreateOptions{})
	}
	selectors := []string{"", "k0=a", "k0!=a", "k1", "!k2", "k0 in (a,b)"}
	for i := range 40 {
		opts := metav1.ListOptions{LabelSelector: selectors[rng.IntN(len(selectors))]}
		if rng.IntN(2) == 0 {
			opts.Limit = int64(1 + rng.IntN(20))
		}
		ns := []string{"default", ""}[rng.IntN(2)]
		for page := 0; ; page++ {
			what := fmt.Sprintf("list %d page %d (%+v)", i, page, opts)
			l, err := s.List(ctx, widgets, ns, opts)
			j, jerr := s.ListJSON(ctx, widgets, ns, opts)
			if err != nil || jerr != nil {
				t.Fatalf("%s: %v, %v", what, err, jerr)
			}
			if j.APIVersion != l.GetAPIVersion() || j.Kind != l.GetKind() || j.ResourceVersion != l.GetResourceVersion() || j.Continue != l.GetContinue() {
				t.Fatalf("%s: header %+v, want %s %s %s %q", what, j, l.GetAPIVersion(), l.GetKind(), l.GetResourceVersion(), l.GetContinue())
			}
			if len(j.Items) != len(l.Items) {
				t.Fatalf("%s: %d items, want %d", what, len(j.Items), len(l.Items))
			}
			for k := range l.Items {
				sameJSON(t, fmt.Sprintf("%s item %d", what, k), j.Items[k], &l.Items[k])
			}
			if l.GetContinue() == "" {
				break
			}
			opts.Continue = l.GetContinue()
		}
	}
}
