package kinds

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apiserver/pkg/warning"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/kinds/kindstest"
)

// unknownFieldCases are objects of each built-in kind family with unknown
// fields at several depths, the paths kube-apiserver's strict decoder
// reports for them (sorted) and the object stored once they are dropped.
var unknownFieldCases = []struct {
	name    string
	gvr     schema.GroupVersionResource
	in      string
	unknown []string
	want    string
}{
	{
		name:    "Role rule with a misspelt field",
		gvr:     RoleResource,
		in:      `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: default}, rules: [{verb: [get], resources: [pods], apiGroups: [""]}]}`,
		unknown: []string{"rules[0].verb"},
		want:    `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: default}, rules: [{resources: [pods], apiGroups: [""]}]}`,
	},
	{
		name: "ClusterRole aggregation selector and second rule",
		gvr:  ClusterRoleResource,
		in: `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: c, labels: {a.b/c: "x"}},
			rules: [{verbs: [get], nonResourceURLs: [/x]}, {verbs: [get], resources: [pods], apiGroups: [""], bogus: {deep: 1}}],
			aggregationRule: {clusterRoleSelectors: [{matchLabels: {any.key/x: "y"}, matchLabelz: {}}]}, extra: 1}`,
		unknown: []string{"aggregationRule.clusterRoleSelectors[0].matchLabelz", "extra", "rules[1].bogus"},
		want: `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: c, labels: {a.b/c: "x"}},
			rules: [{verbs: [get], nonResourceURLs: [/x]}, {verbs: [get], resources: [pods], apiGroups: [""]}],
			aggregationRule: {clusterRoleSelectors: [{matchLabels: {any.key/x: "y"}}]}}`,
	},
	{
		name:    "RoleBinding subject and roleRef",
		gvr:     RoleBindingResource,
		in:      `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: default}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r, nmae: r}, subjects: [{kind: User, name: u, namespac: x}]}`,
		unknown: []string{"roleRef.nmae", "subjects[0].namespac"},
		want:    `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: default}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}, subjects: [{kind: User, name: u}]}`,
	},
	{
		name:    "ClusterRoleBinding subject",
		gvr:     ClusterRoleBindingResource,
		in:      `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}, subjects: [{kind: Group, name: g}, {kind: User, name: u, Name: v}]}`,
		unknown: []string{"subjects[1].Name"},
		want:    `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}, subjects: [{kind: Group, name: g}, {kind: User, name: u}]}`,
	},
	{
		name:    "Namespace spec and status",
		gvr:     NamespaceResource,
		in:      `{apiVersion: v1, kind: Namespace, metadata: {name: ns1}, spec: {finalizers: [kubernetes], finalizer: x}, status: {phase: Active, conditions: [{type: T, status: "True", why: x}]}}`,
		unknown: []string{"spec.finalizer", "status.conditions[0].why"},
		want:    `{apiVersion: v1, kind: Namespace, metadata: {name: ns1}, spec: {finalizers: [kubernetes]}, status: {phase: Active, conditions: [{type: T, status: "True"}]}}`,
	},
	{
		name:    "ConfigMap keeps its data keys",
		gvr:     ConfigMapResource,
		in:      `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}, data: {a.b: "1", rules: x}, binaryData: {k: eA==}, immutable: false, dta: {x: y}}`,
		unknown: []string{"dta"},
		want:    `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}, data: {a.b: "1", rules: x}, binaryData: {k: eA==}, immutable: false}`,
	},
	{
		name:    "Secret keeps data and stringData",
		gvr:     SecretResource,
		in:      `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, type: Opaque, data: {k: eA==}, stringData: {p: q}, dat: {}}`,
		unknown: []string{"dat"},
		want:    `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, type: Opaque, data: {k: eA==}, stringData: {p: q}}`,
	},
	{
		name:    "ServiceAccount references",
		gvr:     ServiceAccountResource,
		in:      `{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: default}, secrets: [{name: a, nam: b}], imagePullSecrets: [{name: p, x: 1}], automountServiceAccountToken: false}`,
		unknown: []string{"imagePullSecrets[0].x", "secrets[0].nam"},
		want:    `{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: default}, secrets: [{name: a}], imagePullSecrets: [{name: p}], automountServiceAccountToken: false}`,
	},
	{
		name: "Event object reference and times",
		gvr:  EventResource,
		in: `{apiVersion: v1, kind: Event, metadata: {name: e, namespace: default}, involvedObject: {kind: Pod, name: p, podName: p},
			reason: R, count: 2, firstTimestamp: "2026-01-01T00:00:00Z", eventTime: "2026-01-01T00:00:00.000001Z", source: {component: c, comp: d}}`,
		unknown: []string{"involvedObject.podName", "source.comp"},
		// An Event is also given the shape corev1.Event encodes it to.
		want: `{apiVersion: v1, kind: Event, metadata: {name: e, namespace: default}, involvedObject: {kind: Pod, name: p},
			reason: R, count: 2, firstTimestamp: "2026-01-01T00:00:00Z", eventTime: "2026-01-01T00:00:00.000001Z", source: {component: c},
			lastTimestamp: null, reportingComponent: "", reportingInstance: ""}`,
	},
	{
		// A CRD's schema is a JSON schema: its properties' names, its
		// x-kubernetes-* keys and its defaults are not unknown fields,
		// but a misspelt keyword of JSONSchemaProps is, at its path
		// through the properties map (whose keys may hold dots).
		name: "CRD schema",
		gvr:  CRDResource,
		in: `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.example.com},
			spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget, singularr: gadget},
			versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object,
				x-kubernetes-preserve-unknown-fields: true,
				properties: {spec: {type: object, properties: {size: {type: integer, minimun: 1, default: 3},
					a.b: {type: string, x-kubernetes-validations: [{rule: "self != ''", mesage: m}]},
					any: {x-kubernetes-int-or-string: true, default: {free: form}}}}}}}}]}}`,
		unknown: []string{
			"spec.names.singularr",
			"spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.a.b.x-kubernetes-validations[0].mesage",
			"spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.minimun",
		},
		want: `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.example.com},
			spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget},
			versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object,
				x-kubernetes-preserve-unknown-fields: true,
				properties: {spec: {type: object, properties: {size: {type: integer, default: 3},
					a.b: {type: string, x-kubernetes-validations: [{rule: "self != ''"}]},
					any: {x-kubernetes-int-or-string: true, default: {free: form}}}}}}}}]}}`,
	},
}

// The unknown fields inside a CRD schema's items, additionalProperties,
// additionalItems or dependencies, which decode themselves leniently, are
// dropped without being reported, as kube-apiserver stores the schema its
// Go type encodes; the unknown field beside them is reported.
func init() {
	unknownFieldCases = append(unknownFieldCases, struct {
		name    string
		gvr     schema.GroupVersionResource
		in      string
		unknown []string
		want    string
	}{
		name: "CRD schema unions",
		gvr:  CRDResource,
		in: `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: boxes.example.setpoint.dev},
			spec: {group: example.setpoint.dev, scope: Namespaced, names: {plural: boxes, kind: Box},
			versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, properties: {
				l: {type: array, bogus: 1, items: {type: object, typo: 2, properties: {a: {type: string, deep: 3}}}},
				t: {type: array, items: [{type: string, tuple: 4}]},
				m: {type: object, additionalProperties: {type: string, maxLenght: 5}},
				d: {type: object, dependencies: {a: {required: [b], dep: 6}, c: [e]}},
				b: {type: object, additionalProperties: false}}}}}]}}`,
		unknown: []string{"spec.versions[0].schema.openAPIV3Schema.properties.l.bogus"},
		want: `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: boxes.example.setpoint.dev},
			spec: {group: example.setpoint.dev, scope: Namespaced, names: {plural: boxes, kind: Box},
			versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, properties: {
				l: {type: array, items: {type: object, properties: {a: {type: string}}}},
				t: {type: array, items: [{type: string}]},
				m: {type: object, additionalProperties: {type: string}},
				d: {type: object, dependencies: {a: {required: [b]}, c: [e]}},
				b: {type: object, additionalProperties: false}}}}}]}}`,
	})
}

func TestCoerceBuiltinNestedUnknownFields(t *testing.T) {
	r := NewRegistry()
	for _, tc := range unknownFieldCases {
		t.Run(tc.name, func(t *testing.T) {
			sv, ok := r.Get(tc.gvr)
			if !ok {
				t.Fatalf("%s not served", tc.gvr)
			}
			obj := fromRequestYAML(t, tc.in)
			unknown, err := sv.Coerce(obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.unknown, unknown); diff != "" {
				t.Errorf("unknown fields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(fromRequestYAML(t, tc.want).Object, obj.Object); diff != "" {
				t.Errorf("coerced object (-want +got):\n%s", diff)
			}
			// Coercing again finds nothing: the object is as stored.
			if again, _ := sv.Coerce(obj); len(again) != 0 {
				t.Errorf("second coercion found %q", again)
			}
		})
	}
}

// TestPruneBuiltinWithSchema checks that the walk of the kind's
// structured-merge-diff schema, which spares decoding the objects it
// passes, passes none the decoder would prune: it finds unknown fields in
// each object that has some and none in the objects once pruned, and
// pruning with it gives what the decoding alone gives.
func TestPruneBuiltinWithSchema(t *testing.T) {
	r := NewRegistry()
	for _, tc := range unknownFieldCases {
		t.Run(tc.name, func(t *testing.T) {
			sv, _ := r.Get(tc.gvr)
			if tc.name == "ConfigMap labels" {
				return // metadata is not the Go type's to prune
			}
			bt, ok := newBuiltinTypes(sv)
			if !ok {
				t.Fatal("no schema")
			}
			want := fromRequestYAML(t, tc.want).Object
			delete(want, "metadata")
			// A CRD schema's unions decode themselves: the walk leaves
			// them to the decoder.
			if tc.name != "CRD schema unions" && bt.hasUnknown(want, sv.typed.noFields) {
				t.Error("the schema finds unknown fields in the pruned object")
			}
			for _, schema := range []*builtinTypes{nil, &bt} {
				obj := fromRequestYAML(t, tc.in).Object
				delete(obj, "metadata")
				if schema != nil && !schema.hasUnknown(obj, sv.typed.noFields) {
					t.Error("the schema finds no unknown field")
				}
				unknown, err := sv.typed.prune(obj, func() *builtinTypes { return schema })
				if err != nil {
					t.Fatalf("the object does not decode: %v", err)
				}
				if diff := cmp.Diff(tc.unknown, unknown); diff != "" {
					t.Errorf("schema %v: unknown fields (-want +got):\n%s", schema != nil, diff)
				}
				if diff := cmp.Diff(want, obj); diff != "" {
					t.Errorf("schema %v: pruned object (-want +got):\n%s", schema != nil, diff)
				}
			}
		})
	}
}

// TestStrictFieldsBuiltinModes checks each fieldValidation mode on a
// built-in kind's nested unknown field: Strict refuses it with
// kube-apiserver's text, Warn warns of it, Ignore says nothing; all three
// drop it.
func TestStrictFieldsBuiltinModes(t *testing.T) {
	r := NewRegistry()
	sv, _ := r.Get(RoleResource)
	const role = `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: default, bogus: 1}, rules: [{verb: [get], resources: [pods], apiGroups: [""]}]}`
	for _, tc := range []struct {
		mode     string
		err      string
		warnings []string
	}{
		{mode: metav1.FieldValidationStrict, err: `Role in version "v1" cannot be handled as a Role: strict decoding error: unknown field "metadata.bogus", unknown field "rules[0].verb"`},
		{mode: metav1.FieldValidationWarn, warnings: []string{`unknown field "metadata.bogus"`, `unknown field "rules[0].verb"`}},
		{mode: metav1.FieldValidationIgnore},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			var got warnings
			ctx := warning.WithWarningRecorder(context.Background(), &got)
			obj := kindstest.FromYAML(t, role)
			unknown, err := sv.Coerce(obj)
			if err != nil {
				t.Fatal(err)
			}
			err = sv.StrictFields(ctx, tc.mode, unknown)
			if gotErr := errText(err); gotErr != tc.err {
				t.Errorf("error = %q, want %q", gotErr, tc.err)
			}
			if diff := cmp.Diff(tc.warnings, []string(got)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			rule := obj.Object["rules"].([]any)[0].(map[string]any)
			if _, ok := rule["verb"]; ok {
				t.Error("the unknown field is kept")
			}
			if diff := cmp.Diff(map[string]any{"name": "r", "namespace": "default"}, obj.Object["metadata"]); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type warnings []string

func (w *warnings) AddWarning(_, text string) { *w = append(*w, text) }

// mistypedCases are built-in objects with values of the wrong JSON type,
// each with the decoding error kube-apiserver v1.34 answers for it.
var mistypedCases = []struct {
	name string
	gvr  schema.GroupVersionResource
	in   string
	want string
}{
	{"ConfigMap number", ConfigMapResource, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: 1}}`,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`},
	{"ConfigMap string", ConfigMapResource, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: x}`,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string`},
	{"ConfigMap mistyped before unknown", ConfigMapResource, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: 1}, typo: 2}`,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string`},
	{"Secret base64", SecretResource, `{apiVersion: v1, kind: Secret, metadata: {name: s}, data: {a: "!!x"}}`,
		`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0`},
	{"ServiceAccount bool", ServiceAccountResource, `{apiVersion: v1, kind: ServiceAccount, metadata: {name: s}, automountServiceAccountToken: "yes"}`,
		`ServiceAccount in version "v1" cannot be handled as a ServiceAccount: json: cannot unmarshal string into Go struct field ServiceAccount.automountServiceAccountToken of type bool`},
	{"Namespace finalizers", NamespaceResource, `{apiVersion: v1, kind: Namespace, metadata: {name: ns1}, spec: {finalizers: x}}`,
		`Namespace in version "v1" cannot be handled as a Namespace: json: cannot unmarshal string into Go struct field NamespaceSpec.spec.finalizers of type []v1.FinalizerName`},
	{"Event count", EventResource, `{apiVersion: v1, kind: Event, metadata: {name: e}, involvedObject: {kind: Pod, name: p}, count: three}`,
		`Event in version "v1" cannot be handled as a Event: json: cannot unmarshal string into Go struct field Event.count of type int32`},
	{"Event count out of range", EventResource, `{apiVersion: v1, kind: Event, metadata: {name: e}, involvedObject: {kind: Pod, name: p}, count: 4294967296}`,
		`Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 4294967296 into Go struct field Event.count of type int32`},
	{"Event series count fraction", EventResource, `{apiVersion: v1, kind: Event, metadata: {name: e}, involvedObject: {kind: Pod, name: p}, series: {count: 1.5}}`,
		`Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 1.5 into Go struct field EventSeries.series.count of type int32`},
	{"Event series count out of range", EventResource, `{apiVersion: v1, kind: Event, metadata: {name: e}, involvedObject: {kind: Pod, name: p}, series: {count: 4294967296}}`,
		`Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 4294967296 into Go struct field EventSeries.series.count of type int32`},
	{"Event series time", EventResource, `{apiVersion: v1, kind: Event, metadata: {name: e}, involvedObject: {kind: Pod, name: p}, series: {count: 1, lastObservedTime: garbage}}`,
		`Event in version "v1" cannot be handled as a Event: parsing time "garbage" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "garbage" as "2006"`},
	{"CRD caBundle base64", CRDResource, `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.example.com},
		spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget},
		conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {caBundle: "!!!x", url: "https://x"}}},
		versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}}`,
		`CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: illegal base64 data at input byte 0`},
	{"events.k8s.io Event series time", EventsV1Resource, `{apiVersion: events.k8s.io/v1, kind: Event, metadata: {name: e}, series: {count: 2, lastObservedTime: garbage}}`,
		`Event in version "v1" cannot be handled as a Event: parsing time "garbage" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "garbage" as "2006"`},
	{"events.k8s.io Event series count fraction", EventsV1Resource, `{apiVersion: events.k8s.io/v1, kind: Event, metadata: {name: e}, series: {count: 1.5}}`,
		`Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 1.5 into Go struct field EventSeries.series.count of type int32`},
	{"Role rules object", RoleResource, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r}, rules: {}}`,
		`Role in version "v1" cannot be handled as a Role: json: cannot unmarshal object into Go struct field Role.rules of type []v1.PolicyRule`},
	{"Role verbs string", RoleResource, `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r}, rules: [{verbs: get, bogus: 1}], extra: 1}`,
		`Role in version "v1" cannot be handled as a Role: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string`},
	{"ClusterRoleBinding subject name", ClusterRoleBindingResource, `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b},
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}, subjects: [{kind: User, name: 5, apiGroup: rbac.authorization.k8s.io}]}`,
		`ClusterRoleBinding in version "v1" cannot be handled as a ClusterRoleBinding: json: cannot unmarshal number into Go struct field Subject.subjects.name of type string`},
	{"ConfigMap labels", ConfigMapResource, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: x}}`,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string`},
	{"CRD versions", CRDResource, `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: gadgets.example.com},
		spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget}, versions: v1}}`,
		`CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: json: cannot unmarshal string into Go struct field CustomResourceDefinitionSpec.spec.versions of type []v1.CustomResourceDefinitionVersion`},
}

// TestCoerceBuiltinMistyped checks that an object that does not decode
// into its Go type is refused with the decoder's error, 400 BadRequest, as
// kube-apiserver refuses it: the schema walk, which spares the decoding
// of objects it finds well typed, hands these to the decoder.
func TestCoerceBuiltinMistyped(t *testing.T) {
	r := NewRegistry()
	for _, tc := range mistypedCases {
		t.Run(tc.name, func(t *testing.T) {
			sv, ok := r.Get(tc.gvr)
			if !ok {
				t.Fatalf("%s not served", tc.gvr)
			}
			_, err := sv.Coerce(fromRequestYAML(t, tc.in))
			if !apierrors.IsBadRequest(err) || err.Error() != tc.want {
				t.Errorf("Coerce = %v, want BadRequest %q", err, tc.want)
			}
		})
	}
}

// fromRequestYAML returns the object s spells as a request's body is
// decoded: integers as int64, other numbers as float64.
func fromRequestYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("yaml: %v", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		t.Fatalf("json: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestDeletePath(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		in, want   string
		ok         bool
	}{
		{"top", "a", `{a: 1, b: 2}`, `{b: 2}`, true},
		{"nested", "a.b", `{a: {b: 1, c: 2}}`, `{a: {c: 2}}`, true},
		{"list item", "a[1].b", `{a: [{b: 1}, {b: 2, c: 3}]}`, `{a: [{b: 1}, {c: 3}]}`, true},
		{"list of lists", "a[0][1].x", `{a: [[{}, {x: 1}]]}`, `{a: [[{}, {}]]}`, true},
		{"dotted key", "p.a.b.x", `{p: {a.b: {x: 1}, a: {c: 1}}}`, `{p: {a.b: {}, a: {c: 1}}}`, true},
		{"dotted key last", "p.a.b", `{p: {a.b: 1, a: {c: 1}}}`, `{p: {a: {c: 1}}}`, true},
		{"missing", "a.x", `{a: {b: 1}}`, `{a: {b: 1}}`, false},
		{"index out of range", "a[3].b", `{a: [{b: 1}]}`, `{a: [{b: 1}]}`, false},
		{"not a list", "a[0].b", `{a: {b: 1}}`, `{a: {b: 1}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := kindstest.FromYAML(t, tc.in).Object
			if got := deletePath(in, tc.path); got != tc.ok {
				t.Errorf("deletePath = %v, want %v", got, tc.ok)
			}
			if diff := cmp.Diff(kindstest.FromYAML(t, tc.want).Object, in); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlainBase64 checks that what plainBase64 takes the decoder takes.
func TestPlainBase64(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", true}, {"YQ==", true}, {"YWI=", true}, {"YWJj", true}, {"YW+/", true},
		{"YQ=", false}, {"Y===", false}, {"YQ=a", false}, {"Y=Q=", false}, {"!!x=", false}, {"YWJj\n", false}, {"YW Jj", false},
	} {
		if got := plainBase64(tc.in); got != tc.want {
			t.Errorf("plainBase64(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if _, err := base64.StdEncoding.DecodeString(tc.in); tc.want && err != nil {
			t.Errorf("%q: the decoder says %v", tc.in, err)
		}
	}
}

// TestMarshalMembers checks that the JSON prune decodes is what
// encoding/json writes for the members kept, objjson's types or not.
func TestMarshalMembers(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "x"},
		"b":        []any{"<&>", int64(-3), 1.5, true, nil, map[string]any{"z": "\u00e9", "a": []any{}}},
		"a":        "plain",
		"c":        map[string]any{},
		"typed":    int32(7),
	}
	for name, keep := range map[string]func(string, any) bool{
		"all":         func(string, any) bool { return true },
		"no metadata": func(k string, _ any) bool { return k != "metadata" },
		"json types":  func(k string, _ any) bool { return k != "typed" },
		"none":        func(string, any) bool { return false },
	} {
		in := map[string]any{}
		for k, v := range obj {
			if keep(k, v) {
				in[k] = v
			}
		}
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalMembers(obj, keep)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %s %v, want %s", name, got, err, want)
		}
	}
}
