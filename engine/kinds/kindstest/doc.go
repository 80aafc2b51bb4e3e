// Package kindstest holds test fixtures shared by the tests of engine/kinds
// and engine: objects of the Widget kind of examples/widget.
package kindstest
