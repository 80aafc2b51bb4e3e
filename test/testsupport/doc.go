// Package testsupport holds the fixtures the module's tests share: a
// builder for test CustomResourceDefinitions (CRD) and a polling helper
// (Eventually, Poll). Only tests import it: the end-to-end tests in test/
// and the package tests under engine/ (test/layout_test.go keeps every
// other package from importing it).
package testsupport
