package engine

import "context"

type createCheckKey struct{}

// WithCreateCheck returns ctx carrying check, which Apply calls before it
// creates the object it applies to because none exists yet: an error from
// check ends the apply with that error and nothing written. It is how the
// API server asks for the create verb when server-side apply creates, as
// kube-apiserver's patch handler does; an apply that updates never calls
// check.
func WithCreateCheck(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, createCheckKey{}, check)
}

// checkCreate runs the check WithCreateCheck put in ctx, if any.
func checkCreate(ctx context.Context) error {
	if check, ok := ctx.Value(createCheckKey{}).(func(context.Context) error); ok && check != nil {
		return check(ctx)
	}
	return nil
}
