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
// A time.Duration travels as integer milliseconds. The codec calls the
// encoder and decoder of encode.go and decode.go, which hold the JSON
// details; what is generated is the per-member code, which names each
// member three or four times (encoder, decoder, aliased decoder, the
// reader of a nested object) and so must not be kept in step by hand.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
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

// gen writes the codec file.
type gen struct {
	p       *parsed
	b       bytes.Buffer
	useTime bool
}

func (g *gen) pf(format string, args ...any) { fmt.Fprintf(&g.b, format, args...) }

func (g *gen) file() ([]byte, error) {
	var body gen
	body.p = g.p
	for _, name := range g.p.order {
		if d := g.p.docs[name]; d != nil && d.fields != nil {
			body.document(d)
		}
	}
	g.pf("// Code generated by gencodec from the types of this package; DO NOT EDIT.\n\n")
	g.pf("package abi\n\n")
	if body.useTime {
		g.pf("import \"time\"\n\n")
	}
	g.b.Write(body.b.Bytes())
	src, err := format.Source(g.b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated code: %w\n%s", err, g.b.Bytes())
	}
	return src, nil
}

func (d *document) appendName() string {
	if d.exported {
		return "AppendJSON"
	}
	return "appendJSON"
}

func (d *document) lastField() *field {
	if n := len(d.fields); n > 0 && d.fields[n-1].last {
		return &d.fields[n-1]
	}
	return nil
}

func (g *gen) document(d *document) {
	n := d.name
	// Encoding.
	g.pf("// %s appends the encoding of r to b.\n", d.appendName())
	if l := d.lastField(); l != nil && d.aliased {
		g.pf("// The %s is the last member, so that DecodeAliased can take it\n// without scanning it.\n", l.key)
	}
	g.pf("func (r *%s) %s(b []byte) []byte {\n\te := newEncoder(b)\n", n, d.appendName())
	for _, f := range d.fields {
		g.encode(f)
	}
	g.pf("\treturn e.close()\n}\n\n")
	if d.needsZero {
		g.pf("// isZero reports whether r has no member to encode.\nfunc (r *%s) isZero() bool {\n\treturn ", n)
		for i, f := range d.fields {
			if i > 0 {
				g.pf(" && ")
			}
			g.pf("%s", zeroTest("r."+f.path, f))
		}
		g.pf("\n}\n\n")
	}
	if d.exported {
		g.pf("// MarshalJSON implements json.Marshaler.\nfunc (r *%s) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }\n\n", n)
		g.pf("// UnmarshalJSON implements json.Unmarshaler.\nfunc (r *%s) UnmarshalJSON(b []byte) error {\n\td := decoder{b: b}\n\treturn r.decode(&d)\n}\n\n", n)
		if d.aliased {
			g.pf("// DecodeAliased decodes b into r; r's RawJSON members and the strings\n")
			g.pf("// of its maps alias b, and the maps r already holds are cleared and\n")
			g.pf("// reused. b must be valid JSON written by AppendJSON")
			if l := d.lastField(); l != nil {
				g.pf(", which puts the\n// %s last: DecodeAliased takes it without scanning it", l.key)
			}
			g.pf(".\nfunc (r *%s) DecodeAliased(b []byte) error {\n\td := decoder{b: b, alias: true}\n\treturn r.decode(&d)\n}\n\n", n)
		}
		if d.owned {
			g.pf("// DecodeOwned decodes b, which the caller hands over and must not change\n")
			g.pf("// afterwards, into r. It checks b like UnmarshalJSON, but r's RawJSON\n")
			g.pf("// members alias b instead of each being copied.\n")
			g.pf("func (r *%s) DecodeOwned(b []byte) error {\n\td := decoder{b: b, owned: true}\n\treturn r.decode(&d)\n}\n\n", n)
		}
		g.pf("func (r *%s) decode(d *decoder) error {\n", n)
		var maps []field
		if d.aliased {
			for _, f := range d.fields {
				if f.kind == kStrMap || f.kind == kRawListMap {
					maps = append(maps, f)
				}
			}
		}
		if len(maps) > 0 {
			for _, f := range maps {
				g.pf("\tvar %s %s\n", oldVar(f), goType(f))
			}
			g.pf("\tif d.alias {\n")
			for _, f := range maps {
				g.pf("\t\t%s = r.%s\n", oldVar(f), f.path)
			}
			g.pf("\t}\n")
		}
		g.pf("\t*r = %s{}\n\tif !d.document() {\n\t\treturn d.err\n\t}\n", n)
		if d.needsDecodeFrom && len(maps) == 0 {
			g.pf("\tr.decodeFrom(d)\n")
		} else {
			g.members(d, len(maps) > 0)
		}
		g.pf("\treturn d.end()\n}\n\n")
	}
	if d.needsDecodeFrom {
		g.pf("// decodeFrom reads an object (or null) into r's members.\nfunc (r *%s) decodeFrom(d *decoder) {\n", n)
		g.members(d, false)
		g.pf("}\n\n")
	}
}

func oldVar(f field) string { return "old" + strings.ReplaceAll(f.path, ".", "") }

func goType(f field) string {
	switch f.kind {
	case kStrMap:
		return "map[string]string"
	case kRawListMap:
		return "map[string][]RawJSON"
	}
	panic("goType of a member that is not a map")
}

func zeroTest(x string, f field) string {
	switch f.kind {
	case kString:
		return x + ` == ""`
	case kInt, kDuration:
		return x + " == 0"
	case kBool:
		return "!" + x
	case kStruct:
		return x + ".isZero()"
	}
	return "len(" + x + ") == 0"
}

func (g *gen) encode(f field) {
	x, k := "r."+f.path, strconv.Quote(f.key)
	switch f.kind {
	case kString:
		if f.named != "" {
			x = "string(" + x + ")"
		}
		g.pf("\te.str(%s, %s)\n", k, x)
	case kInt:
		g.pf("\te.int(%s, int64(%s))\n", k, x)
	case kDuration:
		g.pf("\te.int(%s, millis(%s))\n", k, x)
	case kBool:
		if f.always {
			g.pf("\te.boolAlways(%s, %s)\n", k, x)
		} else {
			g.pf("\te.boolean(%s, %s)\n", k, x)
		}
	case kRaw:
		g.pf("\te.raw(%s, %s)\n", k, x)
	case kStrMap:
		g.pf("\te.strMap(%s, %s)\n", k, x)
	case kRawListMap:
		g.pf("\te.rawListMap(%s, %s)\n", k, x)
	case kStrList:
		g.pf("\te.strList(%s, %s)\n", k, x)
	case kRawList:
		if f.result {
			g.pf("\tif %s != nil || r.Error == \"\" {\n\t\te.key(%s)\n\t\te.b = appendRawList(e.b, %s)\n\t}\n", x, k, x)
		} else {
			g.pf("\te.rawList(%s, %s)\n", k, x)
		}
	case kStruct:
		g.pf("\tif !%s.isZero() {\n\t\te.key(%s)\n\t\te.b = %s.%s(e.b)\n\t}\n", x, k, x, g.p.docs[f.named].appendName())
	case kStructList:
		g.pf("\tif len(%s) != 0 {\n\t\te.key(%s)\n\t\te.b = append(e.b, '[')\n\t\tfor i := range %s {\n", x, k, x)
		g.pf("\t\t\tif i > 0 {\n\t\t\t\te.b = append(e.b, ',')\n\t\t\t}\n\t\t\te.b = %s[i].%s(e.b)\n\t\t}\n\t\te.b = append(e.b, ']')\n\t}\n", x, g.p.docs[f.named].appendName())
	}
}

// members writes the loop over an object's members; reuse passes the
// maps saved before r was reset to the map readers.
func (g *gen) members(d *document, reuse bool) {
	g.pf("\tfor first, open := true, d.open('{'); open; first = false {\n\t\tk, ok := d.member(first)\n\t\tif !ok {\n\t\t\tbreak\n\t\t}\n\t\tswitch string(k) {\n")
	for _, f := range d.fields {
		x := "r." + f.path
		g.pf("\t\tcase %s:\n", strconv.Quote(f.key))
		switch f.kind {
		case kString:
			if f.named != "" {
				g.pf("\t\t\t%s = %s(d.str())\n", x, f.named)
			} else {
				g.pf("\t\t\t%s = d.str()\n", x)
			}
		case kInt:
			g.pf("\t\t\t%s = int(d.int())\n", x)
		case kDuration:
			g.useTime = true
			g.pf("\t\t\t%s = time.Duration(d.int()) * time.Millisecond\n", x)
		case kBool:
			g.pf("\t\t\t%s = d.boolean()\n", x)
		case kRaw:
			if f.last && d.aliased {
				g.pf("\t\t\t%s = d.lastRaw()\n", x)
			} else {
				g.pf("\t\t\t%s = d.raw()\n", x)
			}
		case kStrMap:
			if reuse {
				g.pf("\t\t\t%s = d.strMapInto(%s)\n", x, oldVar(f))
			} else {
				g.pf("\t\t\t%s = d.strMap()\n", x)
			}
		case kRawListMap:
			if reuse {
				g.pf("\t\t\t%s = d.rawListMap(%s)\n", x, oldVar(f))
			} else {
				g.pf("\t\t\t%s = d.rawListMap(nil)\n", x)
			}
		case kStrList:
			g.pf("\t\t\t%s = d.strList()\n", x)
		case kRawList:
			g.pf("\t\t\t%s = d.rawList()\n", x)
		case kStruct:
			g.pf("\t\t\t%s.decodeFrom(d)\n", x)
		case kStructList:
			g.pf("\t\t\tvar l []%s\n\t\t\tfor f, open := true, d.open('['); open && d.element(f); f = false {\n", f.named)
			g.pf("\t\t\t\tvar v %s\n\t\t\t\tv.decodeFrom(d)\n\t\t\t\tl = append(l, v)\n\t\t\t}\n\t\t\t%s = l\n", f.named, x)
		}
	}
	g.pf("\t\tdefault:\n\t\t\td.skip(0)\n\t\t}\n\t}\n")
}
