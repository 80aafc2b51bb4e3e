// Package schema derives a kind's OpenAPI v3 schema, and its whole
// CustomResourceDefinition, from the Go structs of its spec and status, by
// reflection, so that the CRD a plugin ships is generated from the types its
// code uses rather than written by hand:
//
//	crd := schema.CRD(schema.Kind{Group: "example.setpoint.dev", Kind: "Widget",
//		Spec: Spec{}, Status: Status{}})
//	os.Stdout.Write(schema.YAML(crd))
//
// The rules follow controller-gen's: a member is named by its json tag; one
// without omitempty is required; pointers, slices and maps are nullable
// containers of their element's schema; time.Time is a date-time string;
// json.RawMessage, abi.RawJSON and interface members keep unknown fields.
// Struct tags add constraints:
//
//	description:"text"     enum:"a,b,c"          format:"date-time"
//	pattern:"^[a-z]+$"     minimum:"1"           maximum:"10"
//	minLength:"1"          maxLength:"63"        minItems / maxItems
//	default:"small"        (a JSON value, or a bare string)
//
// The status schema always gets the members the engine writes:
// observedGeneration and the conditions list (Ready among them). The
// package uses the standard library only.
package schema
