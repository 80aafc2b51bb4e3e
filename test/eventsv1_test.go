package test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/test/testserver"
)

// TestEventsV1AsKubeAPIServer: events.k8s.io/v1 Events are the core/v1
// Events under kube's field mapping, for the real kubectl and client-go's
// EventsV1 client as against kube-apiserver v1.34: written through either
// API, read, listed with field selectors, printed, watched and deleted
// through both; validated strictly when written through events.k8s.io/v1.
func TestEventsV1AsKubeAPIServer(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	run := func(stdin string, args ...string) (string, string) {
		t.Helper()
		out, errOut, _ := s.KubectlInput(stdin, args...)
		return out, errOut
	}

	if _, errOut := run("apiVersion: v1\nkind: Event\nmetadata: {name: old, namespace: default}\n"+
		"involvedObject: {kind: Pod, name: p, namespace: default}\nreason: Started\nmessage: started it\ntype: Normal\n"+
		"count: 3\nsource: {component: kubelet, host: n1}\nlastTimestamp: \"2026-01-02T03:04:06Z\"\n", "create", "-f", "-"); errOut != "" {
		t.Fatal(errOut)
	}
	if out, errOut := run("apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: new, namespace: default}\n"+
		"regarding: {kind: Pod, name: q, namespace: default}\neventTime: \"2026-01-02T03:04:05.000001Z\"\n"+
		"reportingController: example.com/ctl\nreportingInstance: ctl-1\naction: Scale\nreason: Scaled\nnote: scaled it\ntype: Warning\n",
		"create", "-f", "-", "-o", "jsonpath={.apiVersion} {.note} {.message}"); out != "events.k8s.io/v1 scaled it " || errOut != "" {
		t.Fatalf("create through events.k8s.io/v1: %q %s", out, errOut)
	}

	t.Run("kubectl", func(t *testing.T) {
		out, errOut := run("", "get", "events.v1.events.k8s.io", "old", "-o",
			"jsonpath={.apiVersion} {.regarding.name} {.note} {.deprecatedCount} {.deprecatedSource.host} {.deprecatedLastTimestamp}")
		if want := "events.k8s.io/v1 p started it 3 n1 2026-01-02T03:04:06Z"; out != want {
			t.Errorf("get events.v1.events.k8s.io old: %q %s, want %q", out, errOut, want)
		}
		out, errOut = run("", "get", "events", "new", "-o", "jsonpath={.apiVersion} {.involvedObject.name} {.message} {.reportingComponent}")
		if want := "v1 q scaled it example.com/ctl"; out != want {
			t.Errorf("get events new: %q %s, want %q", out, errOut, want)
		}
		out, errOut = run("", "get", "events.v1.events.k8s.io", "--field-selector", "regarding.name=p,type=Normal", "-o", "name")
		if out != "event.events.k8s.io/old\n" {
			t.Errorf("field selector regarding.name: %q %s", out, errOut)
		}
		out, _ = run("", "get", "events.v1.events.k8s.io")
		if lines := strings.Split(out, "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "LAST SEEN   TYPE      REASON    OBJECT   MESSAGE") ||
			!strings.Contains(lines[1], "Warning   Scaled    pod/q    scaled it") {
			t.Errorf("get events.v1.events.k8s.io table:\n%s", out)
		}
		_, errOut = run("", "get", "events.v1.events.k8s.io", "--field-selector", "source=x")
		if want := `field label not supported: source`; !strings.HasSuffix(strings.TrimSpace(errOut), want) {
			t.Errorf("field selector source: %q, want ...%q", errOut, want)
		}
		_, errOut = run("apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: bad, namespace: default}\n"+
			"regarding: {kind: Pod, name: q, namespace: default}\ndeprecatedCount: 2\nseries: {count: 1}\n", "create", "-f", "-")
		const want = "The Event \"bad\" is invalid: \n* series.count: Invalid value: \"\": should be at least 2\n" +
			"* series.lastObservedTime: Required value\n* eventTime: Required value\n" +
			"* type: Invalid value: \"\": has invalid value: \n* count: Invalid value: \"\": needs to be unset\n"
		if errOut != want {
			t.Errorf("create invalid events.k8s.io/v1 Event:\n got %q\nwant %q", errOut, want)
		}
	})

	t.Run("client-go", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(s.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		list, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w1, err := cs.EventsV1().Events("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w1.Stop()
		w0, err := cs.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w0.Stop()
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "cg", Namespace: "default"},
			EventTime:           metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			Regarding:           corev1.ObjectReference{Kind: "Pod", Name: "r", Namespace: "default"},
			Series:              &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC))},
			ReportingController: "example.com/cg", ReportingInstance: "cg-1", Action: "Act", Reason: "Did", Note: "did it", Type: "Normal",
		}
		if _, err := cs.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-w1.ResultChan():
			got, ok := e.Object.(*eventsv1.Event)
			if e.Type != watch.Added || !ok || got.Name != "cg" || got.Note != "did it" || got.Series == nil || got.Series.Count != 2 {
				t.Errorf("events.k8s.io/v1 watch: %s %+v", e.Type, e.Object)
			}
		case <-ctx.Done():
			t.Fatal("events.k8s.io/v1 watch: no event")
		}
		select {
		case e := <-w0.ResultChan():
			got, ok := e.Object.(*corev1.Event)
			if e.Type != watch.Added || !ok || got.Name != "cg" || got.Message != "did it" || got.InvolvedObject.Name != "r" ||
				got.ReportingController != "example.com/cg" {
				t.Errorf("core/v1 watch: %s %+v", e.Type, e.Object)
			}
		case <-ctx.Done():
			t.Fatal("core/v1 watch: no event")
		}
		old, err := cs.EventsV1().Events("default").Get(ctx, "old", metav1.GetOptions{})
		if err != nil || old.Regarding.Name != "p" || old.DeprecatedCount != 3 || old.DeprecatedSource.Component != "kubelet" {
			t.Errorf("EventsV1 get old: %+v %v", old, err)
		}
		// As kube's components send them: protobuf.
		cfg := s.RESTConfig()
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		pb, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ev.Name, ev.Note = "pb", "in protobuf"
		if _, err := pb.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("protobuf create: %v", err)
		}
		if got, err := pb.EventsV1().Events("default").Get(ctx, "pb", metav1.GetOptions{}); err != nil || got.Note != "in protobuf" {
			t.Errorf("protobuf get: %+v %v", got, err)
		}
		<-w1.ResultChan()
		<-w0.ResultChan()
		if err := cs.CoreV1().Events("default").Delete(ctx, "cg", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-w1.ResultChan():
			if e.Type != watch.Deleted {
				t.Errorf("events.k8s.io/v1 watch after core/v1 delete: %s", e.Type)
			}
		case <-ctx.Done():
			t.Fatal("events.k8s.io/v1 watch: no delete event")
		}
	})
}
