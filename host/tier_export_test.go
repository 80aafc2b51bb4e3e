package host

import "context"

// SetTierCompileHook makes f run before each background compile of h; a
// test holds the compile back with it, or makes it fail.
func SetTierCompileHook(h *Host, f func(context.Context) error) { h.tierCompileHook = f }
