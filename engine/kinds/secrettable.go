package kinds

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// dataTable is the table kube-apiserver prints for Secrets (NAME, TYPE,
// DATA, AGE) and ConfigMaps (NAME, DATA, AGE): DATA counts the keys, and
// no value is shown.
type dataTable struct {
	secret bool
	now    func() time.Time
}

func (t dataTable) columns() []metav1.TableColumnDefinition {
	if t.secret {
		return []metav1.TableColumnDefinition{nameColumn,
			{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
			{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]}, ageColumn}
	}
	return []metav1.TableColumnDefinition{nameColumn,
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]}, ageColumn}
}

// ConvertToTable implements rest.TableConvertor for a Secret or a
// ConfigMap, or a list of them.
func (t dataTable) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table, items, err := newTable(obj, opts, t.columns())
	if err != nil {
		return nil, err
	}
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	for _, item := range items {
		u, ok := item.(runtime.Unstructured)
		if !ok {
			return nil, fmt.Errorf("data table: unexpected %T", item)
		}
		m := u.UnstructuredContent()
		acc, err := meta.Accessor(item)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, f := range []string{"data", "binaryData"} {
			if d, ok := m[f].(map[string]any); ok {
				n += len(d)
			}
		}
		age := "<unknown>"
		if ts := acc.GetCreationTimestamp(); !ts.IsZero() {
			age = duration.HumanDuration(now().Sub(ts.Time))
		}
		cells := []any{acc.GetName(), int64(n), age}
		if t.secret {
			typ, _ := m["type"].(string)
			cells = []any{acc.GetName(), typ, int64(n), age}
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: item}})
	}
	return table, nil
}
