// Package kindstest holds test fixtures shared by the tests of engine/kinds
// and engine: objects of the Widget kind of examples/widget and of the Box
// kind, Box schemas, and Rand, the seeded generator of the differential
// sweeps. Test CRDs are built with test/testsupport.CRD.
package kindstest
