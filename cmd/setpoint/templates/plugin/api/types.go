// Package api holds the Go types of the plugin's kind: its spec and status.
// The plugin decodes objects into them (sdk/typed), and cmd/crdgen derives
// the kind's CRD schema from them (sdk/schema), so the two cannot drift:
// change a type, run `make crd`, and apply the new crd.yaml.
//
// Struct tags: json names the member (without omitempty it is required);
// description, enum, minimum, maximum, pattern, minLength, maxLength and
// default become the schema's constraints (see sdk/schema).
package api

// Spec is what a user asks for.
type Spec struct {
	// Message is what the plugin greets with.
	Message string `json:"message" description:"what the plugin greets with" minLength:"1" maxLength:"200"`
	// Replicas is a number the plugin reports back.
	Replicas int32 `json:"replicas,omitempty" description:"how many greetings" minimum:"0" maximum:"10" default:"1"`
}

// Status is what the plugin reports. The engine adds observedGeneration and
// the conditions (Ready among them); the plugin need not declare them.
type Status struct {
	// State is Ready once the plugin has seen the object.
	State string `json:"state,omitempty"`
	// Greeting is the message the plugin made of the spec.
	Greeting string `json:"greeting,omitempty"`
}
