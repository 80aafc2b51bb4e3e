package kinds

import (
	"context"
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// column is what a printer says of a column and kubectl reads: its name,
// type, format and priority (1: shown with -o wide only).
type column struct {
	Name, Type, Format string
	Priority           int32
}

func columnsOf(tbl *metav1.Table) []column {
	var out []column
	for _, c := range tbl.ColumnDefinitions {
		out = append(out, column{c.Name, c.Type, c.Format, c.Priority})
	}
	return out
}

var (
	nameCol = column{"Name", "string", "name", 0}
	ageCol  = column{"Age", "string", "", 0}
)

// TestBindingRow: a binding's row is its name, its role as kind/name, its
// age, and its users, groups and service accounts (namespace/name), each
// joined by ", ", as kube-apiserver prints them; a subject of another kind
// is in none of the lists.
func TestBindingRow(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		doc  string
		want []any
	}{
		{"subjects of each kind",
			"metadata: {name: viewers, creationTimestamp: \"2026-11-21T11:58:30Z\"}\n" +
				"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n" +
				"subjects:\n- {kind: User, name: ann}\n- {kind: Group, name: team}\n- {kind: User, name: bob}\n" +
				"- {kind: ServiceAccount, name: robot, namespace: a}\n- {kind: ServiceAccount, name: ci, namespace: b}\n" +
				"- {kind: Machine, name: m1}\n",
			[]any{"viewers", "ClusterRole/view", "90s", "ann, bob", "team", "a/robot, b/ci"}},
		{"no subjects",
			"metadata: {name: none, creationTimestamp: \"2026-11-11T12:00:00Z\"}\nroleRef: {kind: Role, name: edit}\n",
			[]any{"none", "Role/edit", "10d", "", "", ""}},
		{"no creation time", "metadata: {name: new}\nroleRef: {kind: Role, name: r}\nsubjects:\n- {kind: Group, name: g}\n",
			[]any{"new", "Role/r", "<unknown>", "", "g", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bindingRow(kindstest.FromYAML(t, tt.doc), now); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestBuiltinTables checks the table of every built-in kind, as the
// registry serves it, against kube-apiserver 1.34's: columns (names,
// order, types, formats, priorities) and the cells of one object.
func TestBuiltinTables(t *testing.T) {
	ctx := context.Background()
	created := time.Now().Add(-240 * time.Hour).UTC().Format(time.RFC3339) // 10 days ago: "10d"
	meta := "metadata: {name: x, namespace: default, resourceVersion: \"5\", creationTimestamp: \"" + created + "\"}\n"
	createdAt := column{"Created At", "date", "", 0}
	tests := []struct {
		gvr     schema.GroupVersionResource
		doc     string
		columns []column
		cells   []any
	}{
		{NamespaceResource, "apiVersion: v1\nkind: Namespace\n" + meta + "status: {phase: Active}\n",
			[]column{nameCol, {"Status", "string", "", 0}, ageCol}, []any{"x", "Active", "10d"}},
		{ServiceAccountResource, "apiVersion: v1\nkind: ServiceAccount\n" + meta + "secrets: [{name: a}, {name: b}]\n",
			[]column{nameCol, {"Secrets", "string", "", 0}, ageCol}, []any{"x", int64(2), "10d"}},
		{SecretResource, "apiVersion: v1\nkind: Secret\n" + meta + "type: Opaque\ndata: {a: YQ==}\n",
			[]column{nameCol, {"Type", "string", "", 0}, {"Data", "string", "", 0}, ageCol}, []any{"x", "Opaque", int64(1), "10d"}},
		{ConfigMapResource, "apiVersion: v1\nkind: ConfigMap\n" + meta + "data: {a: b}\nbinaryData: {c: YQ==}\n",
			[]column{nameCol, {"Data", "string", "", 0}, ageCol}, []any{"x", int64(2), "10d"}},
		{EventResource, "apiVersion: v1\nkind: Event\n" + meta + "involvedObject: {kind: Pod, name: p}\nreason: R\ntype: Normal\nmessage: m\n" +
			"count: 2\nsource: {component: c}\nfirstTimestamp: \"" + created + "\"\nlastTimestamp: \"" + created + "\"\n",
			[]column{{"Last Seen", "string", "", 0}, {"Type", "string", "", 0}, {"Reason", "string", "", 0}, {"Object", "string", "", 0},
				{"Subobject", "string", "", 1}, {"Source", "string", "", 1}, {"Message", "string", "", 0},
				{"First Seen", "string", "", 1}, {"Count", "string", "", 1}, {"Name", "string", "name", 1}},
			[]any{"10d", "Normal", "R", "pod/p", "", "c", "m", "10d", int64(2), "x"}},
		{CRDResource, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n" + meta,
			[]column{nameCol, createdAt}, []any{"x", created}},
		{RoleResource, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n" + meta,
			[]column{nameCol, createdAt}, []any{"x", created}},
		{ClusterRoleResource, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n" + meta,
			[]column{nameCol, createdAt}, []any{"x", created}},
		{RoleBindingResource, "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n" + meta +
			"roleRef: {kind: ClusterRole, name: view}\nsubjects: [{kind: User, name: ann}, {kind: ServiceAccount, name: s, namespace: default}]\n",
			[]column{nameCol, {"Role", "string", "", 0}, ageCol, {"Users", "string", "", 1}, {"Groups", "string", "", 1}, {"ServiceAccounts", "string", "", 1}},
			[]any{"x", "ClusterRole/view", "10d", "ann", "", "default/s"}},
		{ClusterRoleBindingResource, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n" + meta +
			"roleRef: {kind: ClusterRole, name: admin}\nsubjects: [{kind: Group, name: g1}, {kind: Group, name: g2}]\n",
			[]column{nameCol, {"Role", "string", "", 0}, ageCol, {"Users", "string", "", 1}, {"Groups", "string", "", 1}, {"ServiceAccounts", "string", "", 1}},
			[]any{"x", "ClusterRole/admin", "10d", "", "g1, g2", ""}},
	}
	r := NewRegistry()
	for _, tt := range tests {
		t.Run(tt.gvr.Resource, func(t *testing.T) {
			k, ok := r.Get(tt.gvr)
			if !ok {
				t.Fatalf("%v not served", tt.gvr)
			}
			obj := kindstest.FromYAML(t, tt.doc)
			l := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*obj}}
			l.SetResourceVersion("9")
			l.SetContinue("next")
			tbl, err := k.ConvertToTable(ctx, l, &metav1.TableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := columnsOf(tbl); !reflect.DeepEqual(got, tt.columns) {
				t.Errorf("columns\n%v, want\n%v", got, tt.columns)
			}
			for _, c := range tbl.ColumnDefinitions {
				if c.Description == "" {
					t.Errorf("column %q has no description", c.Name)
				}
			}
			if len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells, tt.cells) {
				t.Fatalf("rows %#v, want cells %#v", tbl.Rows, tt.cells)
			}
			if tbl.Rows[0].Object.Object == nil {
				t.Error("row without its object")
			}
			if tbl.ResourceVersion != "9" || tbl.Continue != "next" {
				t.Errorf("table list metadata %q %q", tbl.ResourceVersion, tbl.Continue)
			}
			// One object, and no headers when asked for none.
			tbl, err = k.ConvertToTable(ctx, obj, &metav1.TableOptions{NoHeaders: true})
			if err != nil || len(tbl.ColumnDefinitions) != 0 || len(tbl.Rows) != 1 || !reflect.DeepEqual(tbl.Rows[0].Cells, tt.cells) {
				t.Errorf("one object without headers: %#v, %v", tbl, err)
			}
			if tbl != nil && tbl.ResourceVersion != "5" {
				t.Errorf("one object's table resourceVersion %q, want 5", tbl.ResourceVersion)
			}
		})
	}
}

// TestLeaseTable: Leases, served by a CRD, get kube-apiserver's printer
// (an empty HOLDER when none holds the lease), not the CRD's columns.
func TestLeaseTable(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "leases.coordination.k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "coordination.k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "leases", Singular: "lease", Kind: "Lease", ListKind: "LeaseList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Holder", Type: "string", JSONPath: ".spec.holderIdentity"}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"holderIdentity": {Type: "string"}}}}}}}},
		},
	}
	ks, err := NewRegistry().BuildCRD(crd)
	if err != nil || len(ks) != 1 {
		t.Fatalf("BuildCRD: %v, %v", ks, err)
	}
	created := time.Now().Add(-240 * time.Hour).UTC().Format(time.RFC3339)
	l := &unstructured.UnstructuredList{}
	for _, doc := range []string{"metadata: {name: held, creationTimestamp: \"" + created + "\"}\nspec: {holderIdentity: replica-0}\n",
		"metadata: {name: free, creationTimestamp: \"" + created + "\"}\nspec: {}\n"} {
		l.Items = append(l.Items, *kindstest.FromYAML(t, doc))
	}
	tbl, err := ks[0].ConvertToTable(context.Background(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := columnsOf(tbl), []column{nameCol, {"Holder", "string", "", 0}, ageCol}; !reflect.DeepEqual(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	want := [][]any{{"held", "replica-0", "10d"}, {"free", "", "10d"}}
	for i, r := range tbl.Rows {
		if !reflect.DeepEqual(r.Cells, want[i]) {
			t.Errorf("row %d: %#v, want %#v", i, r.Cells, want[i])
		}
	}
}
