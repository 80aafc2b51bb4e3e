package kinds

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/setpoint-dev/setpoint/engine/internal/objjson"
)

// marshalObject returns what Unstructured.MarshalJSON gives for obj (compact
// JSON, keys sorted, HTML-escaped strings as encoding/json writes them, and
// a newline), without reflection for the types JSON decoding produces:
// map[string]any, []any, string, int64, float64, bool and nil. It reports
// false for anything else; the caller then uses MarshalJSON.
func marshalObject(obj map[string]any) ([]byte, bool) {
	return appendObject(make([]byte, 0, 1024), obj)
}

// appendObject is marshalObject into buf.
func appendObject(buf []byte, obj map[string]any) ([]byte, bool) {
	b, ok := objjson.Append(buf, obj)
	if !ok {
		return nil, false
	}
	return append(b, '\n'), true
}

// MarshalJSON returns obj.MarshalJSON(): the same bytes, made without
// reflection when obj holds only the types JSON decoding produces.
func MarshalJSON(obj *unstructured.Unstructured) ([]byte, error) {
	if obj.Object != nil {
		if b, ok := marshalObject(obj.Object); ok {
			return b, nil
		}
	}
	return obj.MarshalJSON()
}

// encodeBuffer returns the buffer Encode writes k's next document into:
// room for the last size noted (noteEncoded) and an eighth more, so that a
// kind whose objects are alike in size encodes each in one allocation,
// not one that doubles (and copies) as it goes.
func (k *Kind) encodeBuffer() []byte {
	n := int(k.encodedSize.Load())
	return make([]byte, 0, max(1024, n+n/8+64))
}

// noteEncoded records the length of a document Encode made when it is
// larger than the last noted or under half of it: a run of objects of
// about one size writes it once, and one large object leaves no large
// buffers behind it for long.
func (k *Kind) noteEncoded(n int) {
	if last := k.encodedSize.Load(); int64(n) > last || int64(n) < last/2 {
		k.encodedSize.Store(int64(n))
	}
}
