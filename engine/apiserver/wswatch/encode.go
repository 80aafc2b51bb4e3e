package wswatch

import (
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// EncodeEvent encodes ev as one meta/v1 WatchEvent in JSON:
// {"type":"ADDED","object":{...}}. A Status without apiVersion and kind gets
// v1 Status.
func EncodeEvent(ev watch.Event) ([]byte, error) {
	var obj any = ev.Object
	if st, ok := ev.Object.(*metav1.Status); ok && st.Kind == "" {
		c := *st
		c.Kind, c.APIVersion = "Status", "v1"
		obj = &c
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("wswatch: encode %s event: %w", ev.Type, err)
	}
	b := make([]byte, 0, len(raw)+32)
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type...)
	b = append(b, `","object":`...)
	b = append(b, raw...)
	b = append(b, '}')
	return b, nil
}

// errorEvent is the ERROR event that reports err.
func errorEvent(err error) watch.Event {
	var st metav1.Status
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		st = s.Status()
	} else {
		st = apierrors.NewInternalError(err).Status()
	}
	return watch.Event{Type: watch.Error, Object: &st}
}
