package abi

// StringMap returns a copy of the object of strings at path (labels,
// annotations), or nil when it is absent, not an object or holds a value
// that is not a string or null.
func (r RawJSON) StringMap(path ...string) map[string]string {
	v, ok := r.Get(path...)
	if !ok || len(v) == 0 || v[0] != '{' {
		return nil
	}
	d := decoder{b: v}
	m := d.strMap()
	if d.err != nil {
		return nil
	}
	return m
}
