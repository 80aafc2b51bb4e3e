package kinds

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// leaseResource is coordination.k8s.io/v1 Leases, a Kubernetes kind
// Setpoint serves by a CRD; its table is kube-apiserver's (leaseTable),
// not the CRD's printer columns.
var leaseResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// rowTable is a table as kube-apiserver's printers make it for a built-in
// kind: fixed columns (all of them, priority 1 included, as the server
// sends them for kubectl to pick from) and each object's cells from its
// row function. A JSONPath column cannot make cells such as a binding's
// "ClusterRole/view" or its subjects joined by kind.
type rowTable struct {
	columns []metav1.TableColumnDefinition
	// row returns the cells of the object u, at the time now.
	row func(u *unstructured.Unstructured, now time.Time) []any
	now func() time.Time
}

// ConvertToTable implements rest.TableConvertor for an object of the kind
// or a list of them.
func (t rowTable) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table, items, err := newTable(obj, opts, t.columns)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	at := now()
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, item := range items {
		u, ok := item.(*unstructured.Unstructured)
		if !ok {
			c, ok := item.(runtime.Unstructured)
			if !ok {
				return nil, fmt.Errorf("table: unexpected %T", item)
			}
			u = &unstructured.Unstructured{Object: c.UnstructuredContent()}
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: t.row(u, at), Object: runtime.RawExtension{Object: item}})
	}
	return table, nil
}

// The columns every printer has: an object's name, and its age.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
)

// age is the AGE cell of u: how long ago it was created, as kubectl and
// kube-apiserver print durations ("<unknown>" without a creation time).
func age(u *unstructured.Unstructured, now time.Time) string {
	ts := u.GetCreationTimestamp()
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// namespaceTable is NAME, STATUS (the phase), AGE.
func namespaceTable() rowTable {
	return rowTable{
		columns: []metav1.TableColumnDefinition{nameColumn,
			{Name: "Status", Type: "string", Description: "The status of the namespace"}, ageColumn},
		row: func(u *unstructured.Unstructured, now time.Time) []any {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			return []any{u.GetName(), phase, age(u, now)}
		},
	}
}

// serviceAccountTable is NAME, SECRETS (how many the secrets field lists),
// AGE.
func serviceAccountTable() rowTable {
	return rowTable{
		columns: []metav1.TableColumnDefinition{nameColumn,
			{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]}, ageColumn},
		row: func(u *unstructured.Unstructured, now time.Time) []any {
			secrets, _ := u.Object["secrets"].([]any)
			return []any{u.GetName(), int64(len(secrets)), age(u, now)}
		},
	}
}

// leaseTable is NAME, HOLDER (empty when none holds it), AGE.
func leaseTable() rowTable {
	return rowTable{
		columns: []metav1.TableColumnDefinition{nameColumn,
			{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]}, ageColumn},
		row: func(u *unstructured.Unstructured, now time.Time) []any {
			holder, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
			return []any{u.GetName(), holder, age(u, now)}
		},
	}
}

// bindingTable is the table of RoleBindings (cluster false) or
// ClusterRoleBindings: NAME, ROLE as kind/name, AGE, and in wide output
// USERS, GROUPS and SERVICEACCOUNTS (namespace/name), each list joined
// by ", ".
func bindingTable(cluster bool) rowTable {
	what, roleRef := "roleBinding", rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]
	if cluster {
		what, roleRef = "clusterRoleBinding", rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]
	}
	return rowTable{
		columns: []metav1.TableColumnDefinition{nameColumn,
			{Name: "Role", Type: "string", Description: roleRef},
			ageColumn,
			{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + what},
			{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + what},
			{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + what},
		},
		row: bindingRow,
	}
}

// bindingRow is the row of a RoleBinding or ClusterRoleBinding. Subjects
// of another kind are in none of the lists, as in Kubernetes.
func bindingRow(u *unstructured.Unstructured, now time.Time) []any {
	kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
	name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
	var users, groups, sas []string
	subjects, _ := u.Object["subjects"].([]any)
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		sk, _ := m["kind"].(string)
		sn, _ := m["name"].(string)
		switch sk {
		case rbacv1.UserKind:
			users = append(users, sn)
		case rbacv1.GroupKind:
			groups = append(groups, sn)
		case rbacv1.ServiceAccountKind:
			ns, _ := m["namespace"].(string)
			sas = append(sas, ns+"/"+sn)
		}
	}
	return []any{u.GetName(), kind + "/" + name, age(u, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}
