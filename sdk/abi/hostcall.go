package abi

// Codecs of the host-call documents; see codec.go for the conventions.

// AppendJSON appends the encoding of r to b.
func (r *LogRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("level", r.Level)
	e.str("message", r.Message)
	e.strMap("attrs", r.Attrs)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *LogRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *LogRequest) UnmarshalJSON(b []byte) error {
	*r = LogRequest{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "level":
			r.Level = d.str()
		case "message":
			r.Message = d.str()
		case "attrs":
			r.Attrs = d.strMap()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *GetRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("apiVersion", r.APIVersion)
	e.str("kind", r.Kind)
	e.str("namespace", r.Namespace)
	e.str("name", r.Name)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *GetRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *GetRequest) UnmarshalJSON(b []byte) error {
	*r = GetRequest{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "apiVersion":
			r.APIVersion = d.str()
		case "kind":
			r.Kind = d.str()
		case "namespace":
			r.Namespace = d.str()
		case "name":
			r.Name = d.str()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *GetResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.raw("object", r.Object)
	e.boolAlways("found", r.Found)
	e.str("error", r.Error)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *GetResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *GetResponse) UnmarshalJSON(b []byte) error {
	*r = GetResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "object":
			r.Object = d.raw()
		case "found":
			r.Found = d.boolean()
		case "error":
			r.Error = d.str()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *ListRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("apiVersion", r.APIVersion)
	e.str("kind", r.Kind)
	e.str("namespace", r.Namespace)
	e.str("labelSelector", r.LabelSelector)
	e.int("limit", int64(r.Limit))
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *ListRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *ListRequest) UnmarshalJSON(b []byte) error {
	*r = ListRequest{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "apiVersion":
			r.APIVersion = d.str()
		case "kind":
			r.Kind = d.str()
		case "namespace":
			r.Namespace = d.str()
		case "labelSelector":
			r.LabelSelector = d.str()
		case "limit":
			r.Limit = int(d.int())
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *ListResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	if r.Items != nil || r.Error == "" {
		e.key("items")
		e.b = appendRawList(e.b, r.Items)
	}
	e.str("error", r.Error)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *ListResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *ListResponse) UnmarshalJSON(b []byte) error {
	*r = ListResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "items":
			r.Items = d.rawList()
		case "error":
			r.Error = d.str()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *EmitEventRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("type", r.Type)
	e.str("reason", r.Reason)
	e.str("message", r.Message)
	if r.Regarding != (ObjectRef{}) {
		e.key("regarding")
		e.b = r.Regarding.AppendJSON(e.b)
	}
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *EmitEventRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *EmitEventRequest) UnmarshalJSON(b []byte) error {
	*r = EmitEventRequest{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		if r.Event.member(d, k) {
			return true
		}
		if string(k) == "regarding" {
			d.object(func(d *decoder, k []byte) bool {
				if !r.Regarding.member(d, k) {
					d.skip(0)
				}
				return true
			})
		} else {
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *ObjectRef) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("apiVersion", r.APIVersion)
	e.str("kind", r.Kind)
	e.str("namespace", r.Namespace)
	e.str("name", r.Name)
	e.str("uid", r.UID)
	return e.close()
}

func (r *ObjectRef) member(d *decoder, k []byte) bool {
	switch string(k) {
	case "apiVersion":
		r.APIVersion = d.str()
	case "kind":
		r.Kind = d.str()
	case "namespace":
		r.Namespace = d.str()
	case "name":
		r.Name = d.str()
	case "uid":
		r.UID = d.str()
	default:
		return false
	}
	return true
}

// RefOf reads the reference of an object document: apiVersion, kind,
// metadata.namespace, metadata.name and metadata.uid.
func RefOf(obj RawJSON) ObjectRef {
	return ObjectRef{
		APIVersion: obj.String("apiVersion"),
		Kind:       obj.String("kind"),
		Namespace:  obj.String("metadata", "namespace"),
		Name:       obj.String("metadata", "name"),
		UID:        obj.String("metadata", "uid"),
	}
}

// AppendJSON appends the encoding of r to b.
func (r *HostResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("error", r.Error)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *HostResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *HostResponse) UnmarshalJSON(b []byte) error {
	*r = HostResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		if string(k) == "error" {
			r.Error = d.str()
		} else {
			d.skip(0)
		}
		return true
	})
}

// MarshalJSON implements json.Marshaler.
func (r *ObjectRef) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *ObjectRef) UnmarshalJSON(b []byte) error {
	*r = ObjectRef{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		if !r.member(d, k) {
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *WriteRequest) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.str("apiVersion", r.APIVersion)
	e.str("kind", r.Kind)
	e.str("namespace", r.Namespace)
	e.str("name", r.Name)
	e.str("subresource", r.Subresource)
	e.str("uid", r.UID)
	e.str("resourceVersion", r.ResourceVersion)
	e.raw("patch", r.Patch)
	e.raw("object", r.Object)
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *WriteRequest) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *WriteRequest) UnmarshalJSON(b []byte) error {
	*r = WriteRequest{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "apiVersion":
			r.APIVersion = d.str()
		case "kind":
			r.Kind = d.str()
		case "namespace":
			r.Namespace = d.str()
		case "name":
			r.Name = d.str()
		case "subresource":
			r.Subresource = d.str()
		case "uid":
			r.UID = d.str()
		case "resourceVersion":
			r.ResourceVersion = d.str()
		case "patch":
			r.Patch = d.raw()
		case "object":
			r.Object = d.raw()
		default:
			d.skip(0)
		}
		return true
	})
}

// AppendJSON appends the encoding of r to b.
func (r *WriteResponse) AppendJSON(b []byte) []byte {
	e := newEncoder(b)
	e.raw("object", r.Object)
	e.str("error", r.Error)
	e.str("reason", r.Reason)
	e.int("code", int64(r.Code))
	return e.close()
}

// MarshalJSON implements json.Marshaler.
func (r *WriteResponse) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (r *WriteResponse) UnmarshalJSON(b []byte) error {
	*r = WriteResponse{}
	return unmarshal(b, false, func(d *decoder, k []byte) bool {
		switch string(k) {
		case "object":
			r.Object = d.raw()
		case "error":
			r.Error = d.str()
		case "reason":
			r.Reason = d.str()
		case "code":
			r.Code = int(d.int())
		default:
			d.skip(0)
		}
		return true
	})
}
