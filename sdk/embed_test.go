package sdk

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSourceHasEveryPackage fails when a directory holding Go files is added
// to the SDK without being added to the go:embed line: plugin projects
// written by `setpoint plugin init` would lack it.
func TestSourceHasEveryPackage(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" || filepath.Dir(path) == "." {
			return err
		}
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, err := Source.ReadFile(filepath.ToSlash(path))
		if err != nil {
			t.Errorf("%s is not embedded: add its directory to the go:embed line in embed.go", path)
		} else if string(got) != string(want) {
			t.Errorf("%s differs from its embedded copy", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
