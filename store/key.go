package store

import "strings"

// CoreGroup stands for the empty API group in keys.
const CoreGroup = "core"

// ResourcePrefix returns the key prefix of a resource (group and plural), within
// namespace when it is not empty. It ends in a slash, so that it never matches a
// longer resource or namespace name.
func ResourcePrefix(group, resource, namespace string) string {
	if group == "" {
		group = CoreGroup
	}
	var b strings.Builder
	b.Grow(len(group) + len(resource) + len(namespace) + 4)
	b.WriteByte('/')
	b.WriteString(group)
	b.WriteByte('/')
	b.WriteString(resource)
	b.WriteByte('/')
	if namespace != "" {
		b.WriteString(namespace)
		b.WriteByte('/')
	}
	return b.String()
}

// ObjectKey returns the key of one object. namespace is empty for a
// cluster-scoped object.
func ObjectKey(group, resource, namespace, name string) string {
	return ResourcePrefix(group, resource, namespace) + name
}
