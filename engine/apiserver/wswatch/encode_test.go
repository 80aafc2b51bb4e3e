package wswatch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/setpoint-dev/setpoint/engine/apiserver/wswatch"
)

// libraryEvent encodes ev as apimachinery does: the object through the
// client-go scheme's codec (which gives a Status its v1 kind) or the
// unstructured JSON scheme, inside a meta/v1 WatchEvent.
func libraryEvent(t *testing.T, ev watch.Event) []byte {
	t.Helper()
	var raw []byte
	var err error
	switch o := ev.Object.(type) {
	case *unstructured.Unstructured:
		raw, err = runtime.Encode(unstructured.UnstructuredJSONScheme, o)
	default:
		raw, err = runtime.Encode(scheme.Codecs.LegacyCodec(schema.GroupVersion{Version: "v1"}), o)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventRunes are the characters JSON encoders treat apart.
var eventRunes = []rune("az09 \"\\<>&\x00\x1f\t\n\u2028é漢😀")

func eventString(rnd *rand.Rand) string {
	var b strings.Builder
	for range rnd.IntN(12) {
		b.WriteRune(eventRunes[rnd.IntN(len(eventRunes))])
	}
	return b.String()
}

// TestEncodeEventMatchesLibrary: EncodeEvent writes, byte for byte, the
// WatchEvent apimachinery writes, for every event type and for objects,
// statuses with and without their kind, and random content (fixed seed).
func TestEncodeEventMatchesLibrary(t *testing.T) {
	types := []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error}
	expired := apierrors.NewResourceExpired("too old resource version: 5 (9)").Status()
	internal := apierrors.NewInternalError(fmt.Errorf("<boom> & \"quoted\"")).Status()
	withKind := apierrors.NewGone("gone").Status()
	withKind.Kind, withKind.APIVersion = "Status", "v1"
	events := []watch.Event{
		{Type: watch.Error, Object: &expired},
		{Type: watch.Error, Object: &internal},
		{Type: watch.Error, Object: &withKind},
		{Type: watch.Added, Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "a", "resourceVersion": "7"},
			"spec":     map[string]any{"html": "<b>&</b>", "n": int64(3), "f": 0.5, "nil": nil}}}},
		{Type: watch.Bookmark, Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"resourceVersion": "12", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}}},
	}
	rnd := rand.New(rand.NewPCG(14, 3))
	for range 300 {
		spec := map[string]any{}
		for range rnd.IntN(5) {
			switch rnd.IntN(4) {
			case 0:
				spec[eventString(rnd)] = eventString(rnd)
			case 1:
				spec[eventString(rnd)] = rnd.Int64() >> rnd.IntN(63)
			case 2:
				spec[eventString(rnd)] = []any{eventString(rnd), rnd.IntN(2) == 0, nil}
			default:
				spec[eventString(rnd)] = map[string]any{eventString(rnd): rnd.NormFloat64()}
			}
		}
		events = append(events, watch.Event{Type: types[rnd.IntN(len(types))], Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.setpoint.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": eventString(rnd), "resourceVersion": fmt.Sprint(rnd.Uint32())},
			"spec":     spec,
		}}})
		st := apierrors.NewConflict(schema.GroupResource{Group: "example.setpoint.dev", Resource: "widgets"},
			eventString(rnd), fmt.Errorf("%s", eventString(rnd))).Status()
		events = append(events, watch.Event{Type: watch.Error, Object: &st})
	}
	for i, ev := range events {
		got, err := wswatch.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := libraryEvent(t, ev); !bytes.Equal(got, want) {
			t.Fatalf("event %d: EncodeEvent wrote\n%s\napimachinery\n%s", i, got, want)
		}
	}
	// EncodeEvent must not give the caller's Status a kind.
	if expired.Kind != "" {
		t.Errorf("EncodeEvent set the kind of the Status it was given: %q", expired.Kind)
	}
}
