// Package bench holds the plugin-call benchmarks run by `make bench-plugin`:
// the same Widget reconcile logic natively, as a Wasm guest on the native
// and Extism ABIs with preemption on and off, and as a localhost HTTP
// webhook; and the costs of loading a module. Figures are recorded in
// docs/BENCHMARKS.md.
package bench
