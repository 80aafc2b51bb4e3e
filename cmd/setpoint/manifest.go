package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// manifest is one object read from a file, with where it came from.
type manifest struct {
	source string // the file, or <stdin>
	line   int    // the first line of its document
	obj    *unstructured.Unstructured
}

// where is "FILE:LINE" for messages.
func (m manifest) where() string { return fmt.Sprintf("%s:%d", m.source, m.line) }

// manifestExts are the file names a directory is searched for.
var manifestExts = []string{".yaml", ".yml", ".json"}

// readManifests reads every object in paths: files, directories (their
// .yaml, .yml and .json files; with recursive, those of subdirectories too)
// and "-" for stdin.
func readManifests(paths []string, recursive bool, stdin io.Reader) ([]manifest, error) {
	if len(paths) == 0 {
		return nil, usageError("no manifests given: pass -f FILE, -f DIR or -f -")
	}
	var out []manifest
	for _, p := range paths {
		if p == "-" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			ms, err := parseManifests("<stdin>", b)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
			continue
		}
		files, err := manifestFiles(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, exitError(exitUsage, fmt.Errorf("read %s: %w", f, err))
			}
			ms, err := parseManifests(f, b)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
		}
	}
	return out, nil
}

func manifestFiles(path string, recursive bool) ([]string, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitError(exitUsage, fmt.Errorf("%s: no such file or directory", path))
	}
	if err != nil {
		return nil, exitError(exitUsage, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ext := range manifestExts {
			if strings.HasSuffix(p, ext) {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, exitError(exitUsage, fmt.Errorf("read %s: %w", path, err))
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, exitError(exitUsage, fmt.Errorf("%s holds no .yaml, .yml or .json files", path))
	}
	return files, nil
}

// parseManifests splits data into documents (YAML separated by ---, or a
// stream of JSON values) and decodes each into objects; List objects are
// expanded into their items. Errors name the file and line.
func parseManifests(source string, data []byte) ([]manifest, error) {
	var docs []document
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		var err error
		if docs, err = splitJSON(source, data); err != nil {
			return nil, err
		}
	} else {
		docs = splitYAML(data)
	}
	var out []manifest
	for _, d := range docs {
		ms, err := decodeDocument(source, d)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// document is one YAML or JSON document and the line it starts on.
type document struct {
	line int
	data []byte
}

var docSeparator = regexp.MustCompile(`^---(\s.*)?$`)

func splitYAML(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, n := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		if docSeparator.MatchString(line) || line == "..." {
			docs = append(docs, document{line: start, data: bytes.Clone(cur.Bytes())})
			cur.Reset()
			start = n + 1
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	docs = append(docs, document{line: start, data: cur.Bytes()})
	return docs
}

func splitJSON(source string, data []byte) ([]document, error) {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		offset := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			at := dec.InputOffset()
			var se *json.SyntaxError
			if errors.As(err, &se) {
				at = se.Offset
			}
			return nil, exitError(exitInvalid, fmt.Errorf("%s:%d: JSON: %v", source, lineAt(data, at), err))
		}
		// The value starts after any whitespace at offset.
		start := offset
		for start < int64(len(data)) && strings.ContainsRune(" \t\r\n", rune(data[start])) {
			start++
		}
		docs = append(docs, document{line: lineAt(data, start), data: raw})
	}
}

func lineAt(data []byte, offset int64) int {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	return bytes.Count(data[:offset], []byte{'\n'}) + 1
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func decodeDocument(source string, d document) ([]manifest, error) {
	if len(bytes.TrimSpace(stripComments(d.data))) == 0 {
		return nil, nil
	}
	js, err := yaml.YAMLToJSONStrict(d.data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		line := d.line
		if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
			k, _ := strconv.Atoi(msg[m[2]:m[3]])
			line = d.line + k - 1
			msg = strings.TrimSpace(strings.Replace(msg, msg[m[0]:m[1]]+":", "", 1))
		}
		return nil, exitError(exitInvalid, fmt.Errorf("%s:%d: YAML: %s", source, line, msg))
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, exitError(exitInvalid, fmt.Errorf("%s:%d: not an object (a manifest is a mapping with apiVersion, kind and metadata)", source, d.line))
	}
	u := &unstructured.Unstructured{Object: obj}
	m := manifest{source: source, line: d.line, obj: u}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: the object has no %s", m.where(), missingTypeFields(u)))
	}
	if u.IsList() {
		var out []manifest
		err := u.EachListItem(func(o runtime.Object) error {
			item, ok := o.(*unstructured.Unstructured)
			if !ok || item.GetKind() == "" || item.GetAPIVersion() == "" {
				return fmt.Errorf("%s: a List item has no apiVersion or kind", m.where())
			}
			out = append(out, manifest{source: source, line: d.line, obj: item})
			return nil
		})
		if err != nil {
			return nil, exitError(exitInvalid, err)
		}
		return out, nil
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		return nil, exitError(exitInvalid, fmt.Errorf("%s: the %s has no metadata.name", m.where(), u.GetKind()))
	}
	return []manifest{m}, nil
}

func missingTypeFields(u *unstructured.Unstructured) string {
	switch {
	case u.GetKind() == "" && u.GetAPIVersion() == "":
		return "apiVersion and kind"
	case u.GetKind() == "":
		return "kind"
	default:
		return "apiVersion"
	}
}

// stripComments drops comment-only lines, so that a document holding only
// comments counts as empty.
func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}
