// Command noexports is a module without the SDK: it exports no handler and
// no ABI version, so the host must refuse it with a missing-export error.
package main

func main() {}
