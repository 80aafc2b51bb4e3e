// Package testsupport holds the fixtures the module's tests share: a
// builder for test CustomResourceDefinitions (CRD) and a polling helper
// (Eventually, Poll). Only tests import it; it sits under the module's
// internal/ so that the end-to-end tests in test/ and the package tests
// under engine/ can all reach it, and nothing outside the module can.
package testsupport
