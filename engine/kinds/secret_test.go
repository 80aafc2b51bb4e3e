package kinds

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// sentinel is a secret value no error may quote.
const sentinel = "hunter2-sentinel"

var sentinel64 = base64.StdEncoding.EncodeToString([]byte(sentinel))

func kindOf(t *testing.T, gvr schema.GroupVersionResource) *Kind {
	t.Helper()
	k, ok := NewRegistry().Get(gvr)
	if !ok {
		t.Fatalf("%v is not served", gvr)
	}
	return k
}

// errorsText is errs as an API error would print them.
func errorsText(errs field.ErrorList) string { return errs.ToAggregate().Error() }

// TestSecretValidation restates the cases of Kubernetes' TestValidateSecret
// and its type cases: each is one of kube-apiserver's acceptances or
// refusals. No refusal quotes a value of data.
func TestSecretValidation(t *testing.T) {
	k := kindOf(t, SecretResource)
	big := base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1))
	tests := []struct {
		name    string
		doc     string
		wantErr string // "" for valid
	}{
		{"valid", `{"data": {"password": "` + sentinel64 + `", "a.b-c_D": ""}}`, ""},
		{"no data", `{}`, ""},
		{"bad key", `{"data": {"a*b": "` + sentinel64 + `"}}`, `data[a*b]: Invalid value: "a*b"`},
		{"dot key", `{"data": {"..": "` + sentinel64 + `"}}`, `data[..]: Invalid value: ".."`},
		{"not base64", `{"data": {"k": "` + sentinel + `"}}`, "data[k]: Invalid value: \"<secret contents redacted>\""},
		{"not a string", `{"data": {"k": 42}}`, "data[k]: Invalid value"},
		{"too big", `{"data": {"k": "` + big + `"}}`, "data: Too long: may not be more than 1048576 bytes"},
		{"dockercfg without key", `{"type": "kubernetes.io/dockercfg", "data": {}}`, "data[.dockercfg]: Required value"},
		{"dockercfg not JSON", `{"type": "kubernetes.io/dockercfg", "data": {".dockercfg": "` + sentinel64 + `"}}`, "data[.dockercfg]: Invalid value"},
		{"dockerconfigjson", `{"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "` + base64.StdEncoding.EncodeToString([]byte(`{"auths":{}}`)) + `"}}`, ""},
		{"dockerconfigjson not JSON", `{"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "` + sentinel64 + `"}}`, "data[.dockerconfigjson]: Invalid value"},
		{"basic-auth username only", `{"type": "kubernetes.io/basic-auth", "data": {"username": ""}}`, ""},
		{"basic-auth neither", `{"type": "kubernetes.io/basic-auth", "data": {}}`, "data[username]: Required value"},
		{"ssh-auth", `{"type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": "` + sentinel64 + `"}}`, ""},
		{"ssh-auth empty key", `{"type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": ""}}`, "data[ssh-privatekey]: Required value"},
		{"tls", `{"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}`, ""},
		{"tls without key", `{"type": "kubernetes.io/tls", "data": {"tls.crt": ""}}`, "data[tls.key]: Required value"},
		{"tls without cert", `{"type": "kubernetes.io/tls", "stringData": {"tls.key": "` + sentinel + `"}}`, "data[tls.crt]: Required value"},
		{"service-account-token without account", `{"type": "kubernetes.io/service-account-token"}`, "metadata.annotations[kubernetes.io/service-account.name]: Required value"},
		{"service-account-token", `{"type": "kubernetes.io/service-account-token", "metadata": {"annotations": {"kubernetes.io/service-account.name": "sa"}}}`, ""},
		{"custom type", `{"type": "example.com/anything"}`, ""},
		{"immutable not a bool", `{"immutable": "yes"}`, "immutable: Invalid value"},
		{"stringData not strings", `{"stringData": {"k": 1}}`, "stringData: Invalid value: \"<secret contents redacted>\""},
		{"bad name", `{"metadata": {"name": "Not_A_Name"}}`, "metadata.name: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := secretObject(t, tt.doc)
			k.strategy.PrepareForCreate(context.Background(), obj)
			errs := k.strategy.Validate(context.Background(), obj)
			if tt.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errorsText(errs), tt.wantErr) {
				t.Fatalf("errors %v, want %q", errs, tt.wantErr)
			}
			if text := errorsText(errs); strings.Contains(text, sentinel) || strings.Contains(text, sentinel64) {
				t.Errorf("errors quote the secret value: %s", text)
			}
		})
	}
}

// secretObject is a Secret named s in default, with the fields of doc
// (JSON) over it.
func secretObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := rbacObject(t, doc)
	meta, _ := u.Object["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	if _, ok := meta["name"]; !ok {
		meta["name"] = "s"
	}
	meta["namespace"] = "default"
	u.Object["metadata"] = meta
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	return u
}

// TestSecretStringData: stringData is merged into data, its keys winning,
// the type defaults to Opaque, and stringData is not kept.
func TestSecretStringData(t *testing.T) {
	k := kindOf(t, SecretResource)
	obj := secretObject(t, `{"data": {"a": "YQ==", "b": "YQ=="}, "stringData": {"b": "bee", "c": "`+sentinel+`"}}`)
	k.strategy.PrepareForCreate(context.Background(), obj)
	if errs := k.strategy.Validate(context.Background(), obj); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, ok := obj.Object["stringData"]; ok {
		t.Error("stringData kept")
	}
	want := map[string]any{"a": "YQ==", "b": base64.StdEncoding.EncodeToString([]byte("bee")), "c": sentinel64}
	if got := obj.Object["data"].(map[string]any); len(got) != 3 || got["a"] != want["a"] || got["b"] != want["b"] || got["c"] != want["c"] {
		t.Errorf("data = %v, want %v", got, want)
	}
	if obj.Object["type"] != "Opaque" {
		t.Errorf("type = %v, want Opaque", obj.Object["type"])
	}
}

// TestSecretUpdate restates ValidateSecretUpdate: type is immutable, and an
// immutable Secret keeps its data and its immutability.
func TestSecretUpdate(t *testing.T) {
	k := kindOf(t, SecretResource)
	tests := []struct {
		name, old, new, wantErr string
	}{
		{"data change", `{"data": {"a": "YQ=="}}`, `{"data": {"a": "Yg=="}}`, ""},
		{"type change", `{"type": "Opaque"}`, `{"type": "example.com/other"}`, "type: Invalid value"},
		{"immutable data change", `{"immutable": true, "data": {"a": "YQ=="}}`, `{"immutable": true, "data": {"a": "` + sentinel64 + `"}}`, "data: Forbidden: field is immutable when `immutable` is set"},
		{"immutable stringData change", `{"immutable": true, "data": {"a": "YQ=="}}`, `{"immutable": true, "data": {"a": "YQ=="}, "stringData": {"b": "` + sentinel + `"}}`, "data: Forbidden"},
		{"immutable unset", `{"immutable": true}`, `{"immutable": false}`, "immutable: Forbidden"},
		{"immutable metadata change", `{"immutable": true, "data": {"a": "YQ=="}}`, `{"immutable": true, "data": {"a": "YQ=="}, "metadata": {"labels": {"x": "y"}}}`, ""},
		{"made immutable", `{"data": {"a": "YQ=="}}`, `{"immutable": true, "data": {"a": "YQ=="}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := secretObject(t, tt.old)
			k.strategy.PrepareForCreate(context.Background(), old)
			old.SetResourceVersion("1")
			obj := secretObject(t, tt.new)
			obj.SetResourceVersion("1")
			k.strategy.PrepareForUpdate(context.Background(), obj, old)
			errs := k.strategy.ValidateUpdate(context.Background(), obj, old)
			if tt.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errorsText(errs), tt.wantErr) {
				t.Fatalf("errors %v, want %q", errs, tt.wantErr)
			}
			if strings.Contains(errorsText(errs), sentinel) || strings.Contains(errorsText(errs), sentinel64) {
				t.Errorf("errors quote the secret value: %v", errs)
			}
		})
	}
}

// TestConfigMapValidation restates Kubernetes' TestValidateConfigMap and
// TestValidateConfigMapUpdate.
func TestConfigMapValidation(t *testing.T) {
	k := kindOf(t, ConfigMapResource)
	big := strings.Repeat("x", 1<<19+1)
	tests := []struct {
		name, old, new, wantErr string
	}{
		{"valid", "", `{"data": {"k": "v", "a.b-c_D": ""}, "binaryData": {"bin": "YQ=="}}`, ""},
		{"bad key", "", `{"data": {"a*b": "v"}}`, `data[a*b]: Invalid value: "a*b"`},
		{"bad binary key", "", `{"binaryData": {"..": "YQ=="}}`, `binaryData[..]: Invalid value: ".."`},
		{"duplicate key", "", `{"data": {"k": "v"}, "binaryData": {"k": "YQ=="}}`, "data[k]: Invalid value: \"k\": duplicate of key present in binaryData"},
		{"too big", "", `{"data": {"a": "` + big + `", "b": "` + big + `"}}`, "Too long: may not be more than 1048576 bytes"},
		{"binaryData not base64", "", `{"binaryData": {"k": "%%"}}`, "binaryData[k]: Invalid value"},
		{"data not strings", "", `{"data": {"k": 1}}`, "data: Invalid value"},
		{"update", `{"data": {"k": "v"}}`, `{"data": {"k": "w"}}`, ""},
		{"immutable data change", `{"immutable": true, "data": {"k": "v"}}`, `{"immutable": true, "data": {"k": "w"}}`, "data: Forbidden"},
		{"immutable binaryData change", `{"immutable": true, "binaryData": {"k": "YQ=="}}`, `{"immutable": true, "binaryData": {"k": "Yg=="}}`, "binaryData: Forbidden"},
		{"immutable unset", `{"immutable": true}`, `{}`, "immutable: Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := secretObject(t, tt.new)
			obj.SetKind("ConfigMap")
			var errs field.ErrorList
			if tt.old == "" {
				k.strategy.PrepareForCreate(context.Background(), obj)
				errs = k.strategy.Validate(context.Background(), obj)
			} else {
				old := secretObject(t, tt.old)
				old.SetKind("ConfigMap")
				old.SetResourceVersion("1")
				obj.SetResourceVersion("1")
				k.strategy.PrepareForUpdate(context.Background(), obj, old)
				errs = k.strategy.ValidateUpdate(context.Background(), obj, old)
			}
			if tt.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errorsText(errs), tt.wantErr) {
				t.Fatalf("errors %v, want %q", errs, tt.wantErr)
			}
		})
	}
}

// TestDataTable: kube-apiserver's columns, DATA counting keys, no values.
func TestDataTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-90 * time.Second))
	tests := []struct {
		name    string
		table   dataTable
		doc     string
		columns []string
		cells   []any
	}{
		{"secret", dataTable{secret: true, now: func() time.Time { return now }},
			`{"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ==", "tls.key": "` + sentinel64 + `"}}`,
			[]string{"Name", "Type", "Data", "Age"}, []any{"s", "kubernetes.io/tls", int64(2), "90s"}},
		{"configmap", dataTable{now: func() time.Time { return now }},
			`{"data": {"a": "1"}, "binaryData": {"b": "YQ=="}}`,
			[]string{"Name", "Data", "Age"}, []any{"s", int64(2), "90s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := secretObject(t, tt.doc)
			obj.SetCreationTimestamp(created)
			table, err := tt.table.ConvertToTable(context.Background(), obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range table.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			if strings.Join(cols, ",") != strings.Join(tt.columns, ",") {
				t.Errorf("columns %v, want %v", cols, tt.columns)
			}
			if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(tt.cells) {
				t.Fatalf("rows %v", table.Rows)
			}
			for i, c := range tt.cells {
				if table.Rows[0].Cells[i] != c {
					t.Errorf("cell %d = %v, want %v", i, table.Rows[0].Cells[i], c)
				}
			}
		})
	}
}
