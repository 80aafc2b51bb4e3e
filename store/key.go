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

// PrivatePrefix begins the key of every record the server keeps for itself
// rather than serves: uploaded modules, the records of CRDs' read schemas,
// the server's identity. No resource key can begin with it: a resource key
// begins with "/" and an API group, and "~" is in no group's name (a group is
// a DNS subdomain, the core group's segment is CoreGroup). So the API never
// serves a private record, whatever CRDs are created, and a List or Watch of
// a resource never meets one.
const PrivatePrefix = "/~setpoint/"

// PrivateKey returns the key of the private record name: PrivatePrefix
// followed by name, whose first segment says what the record is ("identity",
// "modules/<digest>"). A name ending in a slash gives the prefix of a group
// of records ("modules/").
func PrivateKey(name string) string { return PrivatePrefix + name }

// IsPrivate reports whether key is a private record's (PrivateKey's).
func IsPrivate(key string) bool { return strings.HasPrefix(key, PrivatePrefix) }
