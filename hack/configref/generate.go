package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodenet/nodenet/config"
)

// rootType is where the walk starts.
const rootType = "AgentConfiguration"

// namedValues are the exported constants of package config that field
// descriptions may name, with their compiled values. Generate fails when a
// description names a constant missing here, so the reference never shows
// a name without its value.
var namedValues = map[string]any{
	"GatewayOffset":        config.GatewayOffset,
	"SourceVIPOffset":      config.SourceVIPOffset,
	"SourceVIPAuto":        config.SourceVIPAuto,
	"MinMTU":               config.MinMTU,
	"MinIPv6MTU":           config.MinIPv6MTU,
	"MaxMTU":               config.MaxMTU,
	"MaxVNI":               config.MaxVNI,
	"MinWindowsVNI":        config.MinWindowsVNI,
	"MaxNetworkNameLength": config.MaxNetworkNameLength,
}

// field is one entry of the reference: a field of AgentConfiguration or of
// a struct nested in it.
type field struct {
	// Path is the YAML path, from the json tags: network.vxlan.vni.
	Path string
	// GoPath is the same path in Go field names: Network.VXLAN.VNI.
	GoPath string
	// Type is the field's type in YAML terms.
	Type string
	// Section marks a struct-typed field: its fields follow as entries.
	Section bool
	// Doc is the field's doc comment, as text.
	Doc string
	// Linux and Windows are the values SetDefaults gives the field in an
	// empty config for that OS, rendered; empty when defaulting leaves the
	// field empty.
	Linux, Windows string
	// CommentDefault is what the comment's "Default: ..." sentence says.
	CommentDefault string
	// Required is set when the comment says the field is required.
	Required bool
	// Scope is cluster-wide, node-local or mixed, from the comment (or its
	// struct's doc comment); empty when neither says.
	Scope string
}

// section is a struct type reached by the walk, with the YAML path of the
// field that holds it ("" for the root).
type section struct {
	Path string
	Type string
	// FieldDoc is the doc comment of the field holding the struct; Doc is
	// the struct type's.
	FieldDoc, Doc string
	Fields        []*field
}

// pkgInfo is what Generate reads from the config package's source.
type pkgInfo struct {
	types map[string]*ast.TypeSpec
	docs  map[string]string   // type name → doc comment
	enums map[string][]string // named string type → its constants' values
	cdocs map[string]string   // exported untyped constant → doc comment
}

// Generate renders the reference from the config package source in dir.
func Generate(dir string) ([]byte, error) {
	info, err := parsePackage(dir)
	if err != nil {
		return nil, err
	}
	sections, err := walk(info)
	if err != nil {
		return nil, err
	}
	named, err := mentionedConstants(info, sections)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	render(&b, sections, named, info)
	return b.Bytes(), nil
}

func parsePackage(dir string) (*pkgInfo, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	info := &pkgInfo{
		types: map[string]*ast.TypeSpec{},
		docs:  map[string]string{},
		enums: map[string][]string{},
		cdocs: map[string]string{},
	}
	fset := token.NewFileSet()
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != "config" {
			continue
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					info.types[ts.Name.Name] = ts
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					info.docs[ts.Name.Name] = doc.Text()
				}
			case token.CONST:
				collectConsts(info, gd)
			}
		}
	}
	if info.types[rootType] == nil {
		return nil, fmt.Errorf("type %s not found in %s", rootType, dir)
	}
	return info, nil
}

// collectConsts records the string constants of each named type (the enum
// values) and every exported untyped constant's doc comment (typed ones
// are enum values, listed with their type).
func collectConsts(info *pkgInfo, gd *ast.GenDecl) {
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if name.IsExported() && vs.Type == nil {
				doc := vs.Doc.Text()
				if doc == "" {
					doc = vs.Comment.Text()
				}
				info.cdocs[name.Name] = doc
			}
			typ, ok := vs.Type.(*ast.Ident)
			if !ok || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if v, err := strconv.Unquote(lit.Value); err == nil {
				info.enums[typ.Name] = append(info.enums[typ.Name], v)
			}
		}
	}
}

// defaulted returns an empty config defaulted for os, with nothing read
// from this machine: no NODE_NAME, no hostname.
func defaulted(os config.OS) reflect.Value {
	cfg := &config.AgentConfiguration{}
	config.SetDefaults(cfg, config.DefaultingOptions{
		OS:       os,
		Getenv:   func(string) string { return "" },
		Hostname: func() (string, error) { return "", errors.New("no hostname in the reference") },
	})
	return reflect.ValueOf(cfg).Elem()
}

// walk visits AgentConfiguration and every struct nested in it, depth
// first in field order, and returns one section per struct.
func walk(info *pkgInfo) ([]*section, error) {
	w := &walker{info: info, linux: defaulted(config.OSLinux), windows: defaulted(config.OSWindows)}
	if err := w.visit("", "", rootType, "", "", w.linux, w.windows); err != nil {
		return nil, err
	}
	return w.sections, nil
}

type walker struct {
	info           *pkgInfo
	linux, windows reflect.Value
	sections       []*section
}

func (w *walker) visit(path, goPath, typeName, fieldDoc, scope string, linux, windows reflect.Value) error {
	ts := w.info.types[typeName]
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return fmt.Errorf("%s: type %s is not a struct", path, typeName)
	}
	typeDoc := w.info.docs[typeName]
	if s := scopeOf(typeDoc); s != "" {
		scope = s
	}
	sec := &section{Path: path, Type: typeName, FieldDoc: fieldDoc, Doc: typeDoc}
	w.sections = append(w.sections, sec)
	var nested []func() error
	for _, f := range st.Fields.List {
		tag := jsonTag(f)
		if len(f.Names) == 0 {
			// Embedded: only metav1.TypeMeta, inlined.
			if sel, ok := f.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "TypeMeta" && tag == ",inline" {
				doc := f.Doc.Text()
				for _, names := range [][2]string{{"apiVersion", "APIVersion"}, {"kind", "Kind"}} {
					name, goName := names[0], names[1]
					fl := &field{Path: join(path, name), GoPath: join(goPath, goName), Type: "string", Doc: doc,
						Linux: renderValue(linux.FieldByName(goName)), Windows: renderValue(windows.FieldByName(goName))}
					sec.Fields = append(sec.Fields, fl)
				}
				continue
			}
			return fmt.Errorf("%s: unsupported embedded field %s", path, exprString(f.Type))
		}
		for _, name := range f.Names {
			if !name.IsExported() {
				continue
			}
			yamlName, _, _ := strings.Cut(tag, ",")
			if yamlName == "" || yamlName == "-" {
				return fmt.Errorf("%s.%s: no json name", goPath, name.Name)
			}
			doc := f.Doc.Text()
			fl := &field{
				Path:           join(path, yamlName),
				GoPath:         join(goPath, name.Name),
				Doc:            doc,
				CommentDefault: commentDefault(doc),
				Required:       strings.Contains(doc, "Required;") || strings.Contains(doc, "Required."),
				Scope:          scopeOf(doc),
			}
			if fl.Scope == "" {
				fl.Scope = scope
			}
			lv, wv := fieldValue(linux, name.Name), fieldValue(windows, name.Name)
			if structName, ok := w.structType(f.Type); ok {
				inherited := fl.Scope
				fl.Section, fl.Type, fl.Scope = true, "object", ""
				nested = append(nested, func() error {
					return w.visit(fl.Path, fl.GoPath, structName, fl.Doc, inherited, lv, wv)
				})
			} else {
				fl.Type = w.typeString(f.Type)
				fl.Linux, fl.Windows = renderValue(lv), renderValue(wv)
			}
			sec.Fields = append(sec.Fields, fl)
		}
	}
	for _, n := range nested {
		if err := n(); err != nil {
			return err
		}
	}
	return nil
}

// fieldValue is v's field name, through a pointer; the zero Value when v
// is a nil pointer or invalid.
func fieldValue(v reflect.Value, name string) reflect.Value {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// structType reports whether expr is one of the package's struct types
// (possibly through a pointer), and which.
func (w *walker) structType(expr ast.Expr) (string, bool) {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	id, ok := expr.(*ast.Ident)
	if !ok {
		return "", false
	}
	ts := w.info.types[id.Name]
	if ts == nil {
		return "", false
	}
	_, isStruct := ts.Type.(*ast.StructType)
	return id.Name, isStruct
}

// typeString names a field's type as YAML sees it.
func (w *walker) typeString(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return w.typeString(t.X)
	case *ast.ArrayType:
		return "list of " + plural(w.typeString(t.Elt))
	case *ast.MapType:
		return "map of " + w.typeString(t.Key) + " to " + w.typeString(t.Value)
	case *ast.SelectorExpr:
		if exprString(t) == "metav1.Duration" {
			return "duration"
		}
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string"
		case "bool":
			return "boolean"
		case "int", "int32", "int64":
			return "integer"
		}
		if ts := w.info.types[t.Name]; ts != nil {
			base := w.typeString(ts.Type)
			if values := w.info.enums[t.Name]; len(values) > 0 {
				quoted := make([]string, len(values))
				for i, v := range values {
					quoted[i] = "`" + v + "`"
				}
				return base + ", one of " + strings.Join(quoted, ", ")
			}
			return base
		}
	}
	return exprString(expr)
}

func plural(s string) string {
	switch s {
	case "string", "boolean", "integer", "duration":
		return s + "s"
	}
	return s
}

func exprString(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	}
	return fmt.Sprintf("%T", expr)
}

func jsonTag(f *ast.Field) string {
	if f.Tag == nil {
		return ""
	}
	tag, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return ""
	}
	return reflect.StructTag(tag).Get("json")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var durationType = reflect.TypeOf(metav1.Duration{})

// renderValue renders a defaulted value as YAML would show it, or "" when
// defaulting left it empty. Booleans and numbers always render: their zero
// value is a value (mtu 0, allowRecreate false).
func renderValue(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.Type() == durationType {
		return shortDuration(v.Interface().(metav1.Duration).Duration)
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Slice:
		if v.Len() == 0 {
			return ""
		}
		items := make([]string, v.Len())
		for i := range items {
			items[i] = renderValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case reflect.Map:
		if v.Len() == 0 {
			return ""
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, fmt.Sprintf("%v: %v", k, v.MapIndex(k)))
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// shortDuration is d as an operator writes it: 24h, 1h, 30s, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var defaultSentence = regexp.MustCompile(`Default:\s+(.*?)\.(?:\s|$)`)

// commentDefault is the text of the comment's "Default: ..." sentence.
func commentDefault(doc string) string {
	m := defaultSentence.FindStringSubmatch(strings.Join(strings.Fields(doc), " "))
	if m == nil {
		return ""
	}
	return m[1]
}

// scopeOf reads a doc comment's statement of scope.
func scopeOf(doc string) string {
	lower := strings.ToLower(doc)
	cw, nl := strings.Contains(lower, "cluster-wide"), strings.Contains(lower, "node-local")
	switch {
	case cw && nl:
		return "mixed"
	case cw:
		return "cluster-wide"
	case nl:
		return "node-local"
	}
	return ""
}

var identifier = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// mentionedConstants returns the exported constants of the package that
// the walked doc comments name, sorted; each must have a value in
// namedValues.
func mentionedConstants(info *pkgInfo, sections []*section) ([]string, error) {
	seen := map[string]bool{}
	var missing []string
	scan := func(doc string) {
		for _, id := range identifier.FindAllString(doc, -1) {
			if _, isConst := info.cdocs[id]; !isConst || seen[id] {
				continue
			}
			seen[id] = true
			if _, ok := namedValues[id]; !ok {
				missing = append(missing, id)
			}
		}
	}
	for _, s := range sections {
		scan(s.Doc)
		scan(s.FieldDoc)
		for _, f := range s.Fields {
			scan(f.Doc)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("descriptions name constants without a value in namedValues (hack/configref/generate.go): %s", strings.Join(missing, ", "))
	}
	names := make([]string, 0, len(seen))
	for id := range seen {
		names = append(names, id)
	}
	sort.Strings(names)
	return names, nil
}

// render writes the Markdown reference.
func render(b *bytes.Buffer, sections []*section, named []string, info *pkgInfo) {
	fmt.Fprintf(b, `# Configuration reference

<!-- Generated by hack/configref from config/types.go and config.SetDefaults.
     Do not edit: run `+"`make config-reference`"+`. -->

nodenet-agent reads one `+"`AgentConfiguration`"+` (apiVersion `+"`%s`"+`)
from `+"`--config`"+`; a kube-proxy `+"`KubeProxyConfiguration`"+` or a flannel
`+"`net-conf.json`"+` is accepted in its place and converted
([migration guide](migration.md)). Decoding is strict: an unknown or
misspelled field is an error naming its path. Check a file with
`+"`nodenetctl config validate --os linux|windows --config FILE`"+`, and see every
default filled in with `+"`nodenetctl config convert --node-local --config FILE`"+`.

This page lists every field. For each: its YAML path, its type, its
default, whether it is **cluster-wide** (must be the same on every node:
leave it in the shared ConfigMap) or **node-local** (describes one node: a
shared config leaves it unset so each node defaults its own), and its
description. The descriptions are the doc comments of
[`+"`config/types.go`"+`](../config/types.go) and name fields by their Go names,
the YAML name with a capital letter (`+"`ClusterCIDRs`"+` is `+"`clusterCIDRs`"+`); other
capitalized names (`+"`ValidateForNode`"+`, `+"`LoadOptions`"+`) are the config
package's Go API. Durations are written like `+"`30s`"+`, `+"`1m30s`"+`, `+"`24h`"+`.

Defaults are what the agent fills into an empty config, for a Linux and
for a Windows node (they differ only in the `+"`cni`"+` paths). A field without
a default from the code shows its comment's "Default:" sentence. A config
loaded as shared (`+"`nodenetctl config convert`"+` without `+"`--node-local`"+`) keeps
`+"`nodeName`"+` and the per-OS `+"`cni`"+` paths unset, so that each node fills in
its own.

## All fields

| field | type | default | scope |
|---|---|---|---|
`, config.APIVersion)
	for _, s := range sections {
		for _, f := range s.Fields {
			if f.Section {
				fmt.Fprintf(b, "| [`%s`](#%s) | %s | | |\n", f.Path, anchor(f.Path), f.Type)
				continue
			}
			fmt.Fprintf(b, "| [`%s`](#%s) | %s | %s | %s |\n", f.Path, anchor(f.Path), cell(f.Type), cell(defaultText(f, "<br>")), f.Scope)
		}
	}
	// A struct-typed field is its section's heading: its comment, then
	// the type's, then its fields.
	for _, s := range sections {
		if s.Path == "" {
			fmt.Fprintf(b, "\n## The root\n\n%s\n", markdown(s.Doc))
		} else {
			fmt.Fprintf(b, "\n## `%s`\n\n%s\n\n%s\n", s.Path, markdown(s.FieldDoc), markdown(s.Doc))
		}
		for _, f := range s.Fields {
			if f.Section {
				continue
			}
			fmt.Fprintf(b, "\n### `%s`\n\n", f.Path)
			fmt.Fprintf(b, "- Type: %s\n", f.Type)
			fmt.Fprintf(b, "- Default: %s\n", defaultText(f, "; "))
			if f.Scope != "" {
				fmt.Fprintf(b, "- Scope: %s\n", f.Scope)
			}
			fmt.Fprintf(b, "\n%s\n", markdown(f.Doc))
		}
	}
	if len(named) > 0 {
		b.WriteString("\n## Named values\n\nConstants of the config package that the descriptions above name.\n\n| name | value | meaning |\n|---|---|---|\n")
		for _, name := range named {
			fmt.Fprintf(b, "| `%s` | `%v` | %s |\n", name, namedValues[name], cell(oneLine(info.cdocs[name])))
		}
	}
}

// defaultText is the default column: the code's value(s), else the
// comment's sentence, else "none".
func defaultText(f *field, sep string) string {
	switch {
	case f.Linux != "" && f.Linux == f.Windows:
		return "`" + f.Linux + "`"
	case f.Linux != "" || f.Windows != "":
		return "Linux `" + orNone(f.Linux) + "`" + sep + "Windows `" + orNone(f.Windows) + "`"
	case f.Required:
		return "none: required"
	case f.CommentDefault != "":
		return escape(f.CommentDefault)
	}
	return "none"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// anchor is GitHub's heading anchor for a heading holding only `path`.
func anchor(path string) string {
	return strings.ToLower(strings.ReplaceAll(path, ".", ""))
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func oneLine(doc string) string { return escape(strings.Join(strings.Fields(doc), " ")) }

// escape keeps comment text literal in Markdown.
func escape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `<`, `\<`, "`", "\\`")
	return r.Replace(s)
}

// markdown renders a doc comment: paragraphs of joined lines, indented
// blocks as code.
func markdown(doc string) string {
	var out []string
	var para, code []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, escape(joinLines(para)))
			para = nil
		}
		if len(code) > 0 {
			out = append(out, "```\n"+strings.Join(code, "\n")+"\n```")
			code = nil
		}
	}
	for _, line := range strings.Split(strings.TrimRight(doc, "\n"), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if len(para) > 0 {
				flush()
			}
			code = append(code, strings.TrimRightFunc(line, unicode.IsSpace))
		default:
			if len(code) > 0 {
				flush()
			}
			para = append(para, strings.TrimSpace(line))
		}
	}
	flush()
	return strings.Join(out, "\n\n")
}

// joinLines joins a paragraph's lines with spaces, except after a word
// broken at a hyphen ("kube-" + "proxy").
func joinLines(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			prev := lines[i-1]
			n := len(prev)
			brokenWord := n >= 2 && prev[n-1] == '-' && unicode.IsLetter(rune(prev[n-2])) && unicode.IsLower(rune(l[0]))
			if !brokenWord {
				b.WriteByte(' ')
			}
		}
		b.WriteString(l)
	}
	return b.String()
}
