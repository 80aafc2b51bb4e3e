// Package bench measures the Badger store against plain Badger in the same
// run: durable creates at several concurrencies, and watch fan-out to many
// watchers. Run it with `make bench-store`; docs/BENCHMARKS.md records the
// figures.
package bench
