// Command gencodec writes codec_gen.go, the JSON codec of package abi's
// documents, from their type definitions: `go generate` in sdk/abi runs it.
//
// A struct type whose doc comment carries the directive
//
//	//abi:document [aliased] [owned]
//
// gets AppendJSON, MarshalJSON and UnmarshalJSON, and DecodeAliased or
// DecodeOwned when named; a struct type used inside a document gets the
// same codec as unexported methods. Each member comes from a field's abi
// tag, `abi:"key[,option...]"`, in field order; an embedded struct's
// members are the document's own. A member is omitted when empty unless an
// option says otherwise:
//
//	always  written even when empty (a bool as false)
//	result  a list written, even when empty, unless the document's Error
//	        is set (a failed call carries no result)
//	last    the final member (a RawJSON): DecodeAliased takes it up to the
//	        document's closing brace without scanning it
//
// A time.Duration travels as integer milliseconds, a []byte as a base64
// string (standard encoding, padded, as encoding/json writes it), an int32
// as an integer. The codec calls the
// encoder and decoder of encode.go and decode.go, which hold the JSON
// details; what is generated is the per-member code, which names each
// member three or four times (encoder, decoder, aliased decoder, the
// reader of a nested object) and so must not be kept in step by hand.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Output is the file gencodec writes, next to the type definitions.
const Output = "codec_gen.go"

func main() {
	src, err := Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencodec:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(Output, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gencodec:", err)
		os.Exit(1)
	}
}

type kind int

const (
	kString kind = iota
	kInt
	kBool
	kRaw
	kStrMap
	kRawListMap
	kRawList
	kStrList
	kDuration
	kStruct
	kStructList
	kBytes
)

// field is one member of a document.
type field struct {
	path   string // selector from the receiver, e.g. "Event.Type"
	key    string
	kind   kind
	named  string // kString of a named string type; kStruct, kStructList: the struct
	always bool
	result bool
	last   bool
}

// document is one struct type with a codec.
type document struct {
	name            string
	exported        bool // has the //abi:document directive
	aliased, owned  bool
	fields          []field
	nested, inList  bool // used as a member, as a list element
	needsZero       bool
	needsDecodeFrom bool
}

type parsed struct {
	structs map[string]*ast.StructType
	strs    map[string]bool // named string types
	docs    map[string]*document
	order   []string // struct names in source order
}

// Generate reads the package in dir and returns the formatted codec file.
func Generate(dir string) ([]byte, error) {
	p, err := parse(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range p.order {
		if d := p.docs[name]; d != nil && d.exported {
			if err := p.build(d, map[string]bool{}); err != nil {
				return nil, err
			}
		}
	}
	var g gen
	g.p = p
	return g.file()
}

func parse(dir string) (*parsed, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	p := &parsed{structs: map[string]*ast.StructType{}, strs: map[string]bool{}, docs: map[string]*document{}}
	fset := token.NewFileSet()
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") || base == Output {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				switch t := ts.Type.(type) {
				case *ast.StructType:
					p.structs[ts.Name.Name] = t
					p.order = append(p.order, ts.Name.Name)
					doc := ts.Doc
					if doc == nil {
						doc = gd.Doc
					}
					if d, err := directive(ts.Name.Name, doc); err != nil {
						return nil, err
					} else if d != nil {
						p.docs[d.name] = d
					}
				case *ast.Ident:
					if t.Name == "string" {
						p.strs[ts.Name.Name] = true
					}
				}
			}
		}
	}
	return p, nil
}

func directive(name string, doc *ast.CommentGroup) (*document, error) {
	if doc == nil {
		return nil, nil
	}
	for _, c := range doc.List {
		rest, ok := strings.CutPrefix(c.Text, "//abi:document")
		if !ok {
			continue
		}
		d := &document{name: name, exported: true}
		for _, opt := range strings.Fields(rest) {
			switch opt {
			case "aliased":
				d.aliased = true
			case "owned":
				d.owned = true
			default:
				return nil, fmt.Errorf("%s: unknown option %q of //abi:document", name, opt)
			}
		}
		return d, nil
	}
	return nil, nil
}

// build fills d's fields from its struct type, and those of the struct
// types it uses.
func (p *parsed) build(d *document, seen map[string]bool) error {
	if seen[d.name] || d.fields != nil {
		return nil
	}
	seen[d.name] = true
	st := p.structs[d.name]
	if st == nil {
		return fmt.Errorf("%s is not a struct type of the package", d.name)
	}
	fields, err := p.fieldsOf(d.name, st, "", seen)
	if err != nil {
		return err
	}
	d.fields = fields
	keys := map[string]bool{}
	for i, f := range fields {
		if keys[f.key] {
			return fmt.Errorf("%s: member %q twice", d.name, f.key)
		}
		keys[f.key] = true
		if f.last && i != len(fields)-1 {
			return fmt.Errorf("%s.%s: a last member must be the final field", d.name, f.path)
		}
		if f.result && !slices.ContainsFunc(fields, func(e field) bool { return e.path == "Error" && e.kind == kString }) {
			return fmt.Errorf("%s.%s: a result member needs an Error string field", d.name, f.path)
		}
	}
	return nil
}

func (p *parsed) fieldsOf(owner string, st *ast.StructType, prefix string, seen map[string]bool) ([]field, error) {
	var out []field
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 { // embedded: its members are the owner's
			id, ok := f.Type.(*ast.Ident)
			if !ok || p.structs[id.Name] == nil {
				return nil, fmt.Errorf("%s: embedded field %s is not a struct of the package", owner, types(f.Type))
			}
			inner, err := p.fieldsOf(owner, p.structs[id.Name], prefix+id.Name+".", seen)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		if len(f.Names) != 1 {
			return nil, fmt.Errorf("%s: declare one field per line", owner)
		}
		name := f.Names[0].Name
		if f.Tag == nil {
			return nil, fmt.Errorf("%s.%s: no abi tag", owner, name)
		}
		tag, err := strconv.Unquote(f.Tag.Value)
		if err != nil {
			return nil, err
		}
		spec, ok := reflect.StructTag(tag).Lookup("abi")
		if !ok || spec == "" {
			return nil, fmt.Errorf("%s.%s: no abi tag", owner, name)
		}
		parts := strings.Split(spec, ",")
		fd := field{path: prefix + name, key: parts[0]}
		for _, opt := range parts[1:] {
			switch opt {
			case "always":
				fd.always = true
			case "result":
				fd.result = true
			case "last":
				fd.last = true
			default:
				return nil, fmt.Errorf("%s.%s: unknown option %q", owner, name, opt)
			}
		}
		if err := p.classify(&fd, f.Type, seen); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", owner, name, err)
		}
		switch {
		case fd.always && fd.kind != kBool:
			return nil, fmt.Errorf("%s.%s: always applies to bools", owner, name)
		case fd.result && fd.kind != kRawList:
			return nil, fmt.Errorf("%s.%s: result applies to []RawJSON", owner, name)
		case fd.last && fd.kind != kRaw:
			return nil, fmt.Errorf("%s.%s: last applies to RawJSON", owner, name)
		}
		out = append(out, fd)
	}
	return out, nil
}

func (p *parsed) classify(fd *field, t ast.Expr, seen map[string]bool) error {
	switch t := t.(type) {
	case *ast.Ident:
		switch {
		case t.Name == "string":
			fd.kind = kString
		case t.Name == "int":
			fd.kind = kInt
		case t.Name == "int32":
			fd.kind, fd.named = kInt, "int32"
		case t.Name == "bool":
			fd.kind = kBool
		case t.Name == "RawJSON":
			fd.kind = kRaw
		case p.strs[t.Name]:
			fd.kind, fd.named = kString, t.Name
		case p.structs[t.Name] != nil:
			fd.kind, fd.named = kStruct, t.Name
			d := p.use(t.Name)
			d.nested, d.needsZero, d.needsDecodeFrom = true, true, true
			return p.build(d, seen)
		default:
			return fmt.Errorf("unsupported type %s", t.Name)
		}
		return nil
	case *ast.SelectorExpr:
		if types(t) == "time.Duration" {
			fd.kind = kDuration
			return nil
		}
	case *ast.MapType:
		if types(t.Key) == "string" {
			switch types(t.Value) {
			case "string":
				fd.kind = kStrMap
				return nil
			case "[]RawJSON":
				fd.kind = kRawListMap
				return nil
			}
		}
	case *ast.ArrayType:
		if t.Len != nil {
			break
		}
		switch el := types(t.Elt); {
		case el == "byte":
			fd.kind = kBytes
			return nil
		case el == "RawJSON":
			fd.kind = kRawList
			return nil
		case el == "string":
			fd.kind = kStrList
			return nil
		case p.structs[el] != nil:
			fd.kind, fd.named = kStructList, el
			d := p.use(el)
			d.inList, d.needsDecodeFrom = true, true
			return p.build(d, seen)
		}
	}
	return fmt.Errorf("unsupported type %s", types(t))
}

// use returns the document of the struct type name, made when name has no
// directive (its codec is then unexported).
func (p *parsed) use(name string) *document {
	d := p.docs[name]
	if d == nil {
		d = &document{name: name}
		p.docs[name] = d
	}
	return d
}

// types prints a type expression.
func types(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return types(t.X) + "." + t.Sel.Name
	case *ast.ArrayType:
		return "[]" + types(t.Elt)
	case *ast.MapType:
		return "map[" + types(t.Key) + "]" + types(t.Value)
	case *ast.StarExpr:
		return "*" + types(t.X)
	}
	return fmt.Sprintf("%T", t)
}
