//go:build !linux

package reconcile

// processCPU is not measured here: CPU figures read 0.
func processCPU() int64 { return 0 }

// threadCPU is not measured here either.
func threadCPU() int64 { return 0 }
