// Package coldoc extracts the documentation of every Parquet column of the
// archive from the schemas package source: the column names come from the
// parquet struct tags of schemas.Parquet* types, the descriptions from the
// doc comments of the Go fields they mirror (Trajectory, Message, ToolCall,
// LLMCall, VersionRun, RewardBreakdown). The release package embeds the
// result (columns_gen.go, made by `go generate`) to write dataset cards, and
// its tests check that the generated file matches the current source.
package coldoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// mirrors maps each Parquet struct to the documented struct it mirrors.
var mirrors = map[string]string{
	"ParquetRow":        "Trajectory",
	"ParquetMessage":    "Message",
	"ParquetToolCall":   "ToolCall",
	"ParquetCall":       "LLMCall",
	"ParquetVersionRun": "VersionRun",
	"ParquetBreakdown":  "RewardBreakdown",
}

// Column is one documented column.
type Column struct {
	// Path is the dotted column path, e.g. "messages.tool_calls.name".
	Path string
	// Doc is the description from the Go doc comment.
	Doc string
}

type field struct {
	name, column, typ, doc string
}

// Extract parses the Go files of the schemas package in dir and returns the
// documented columns in schema order (depth first).
func Extract(dir string) ([]Column, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	structs := map[string][]field{}
	typeDocs := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("coldoc: %w", err)
		}
		for _, decl := range af.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc.Text()
				if doc == "" {
					doc = gd.Doc.Text()
				}
				typeDocs[ts.Name.Name] = clean(doc)
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			var fs []field
			for _, fl := range st.Fields.List {
				doc := strings.TrimSpace(fl.Doc.Text())
				if doc == "" && fl.Comment != nil {
					doc = strings.TrimSpace(fl.Comment.Text())
				}
				col := ""
				if fl.Tag != nil {
					tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`"))
					col, _, _ = strings.Cut(tag.Get("parquet"), ",")
				}
				for _, nm := range fl.Names {
					fs = append(fs, field{name: nm.Name, column: col, typ: typeName(fl.Type), doc: doc})
				}
			}
			structs[ts.Name.Name] = fs
			return true
		})
	}
	var out []Column
	var walk func(parquetStruct, prefix string) error
	walk = func(ps, prefix string) error {
		src, ok := structs[mirrors[ps]]
		if !ok {
			return fmt.Errorf("coldoc: no documented struct %s for %s", mirrors[ps], ps)
		}
		for _, f := range structs[ps] {
			if f.column == "" || f.column == "-" {
				continue
			}
			doc := docFor(src, f.name)
			if doc == "" {
				// Undocumented field: describe it by its Go type's doc, else
				// as a field of its struct with the struct's doc.
				for _, sf := range src {
					if sf.name == f.name && typeDocs[sf.typ] != "" {
						doc = typeDocs[sf.typ]
					}
				}
				if doc == "" && typeDocs[mirrors[ps]] != "" {
					doc = fmt.Sprintf("%s of the %s. %s", f.name, mirrors[ps], typeDocs[mirrors[ps]])
				}
			}
			if doc == "" {
				return fmt.Errorf("coldoc: column %s%s: field %s.%s has no doc comment", prefix, f.column, mirrors[ps], f.name)
			}
			out = append(out, Column{Path: prefix + f.column, Doc: doc})
			if _, nested := mirrors[f.typ]; nested {
				if err := walk(f.typ, prefix+f.column+"."); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("ParquetRow", ""); err != nil {
		return nil, err
	}
	return out, nil
}

// docFor finds the doc of field name in a documented struct: its own doc
// comment, else the comment of a field documented together with it ("StartedAt
// and EndedAt bound …"), else the struct has none for it.
func docFor(fs []field, name string) string {
	for _, f := range fs {
		if f.name == name && f.doc != "" {
			return clean(f.doc)
		}
	}
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	for _, f := range fs {
		if f.doc != "" && word.MatchString(f.doc) {
			return clean(f.doc)
		}
	}
	return ""
}

func clean(doc string) string { return strings.Join(strings.Fields(doc), " ") }

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.ArrayType:
		return typeName(t.Elt)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// GoSource renders columns as the Go source of columns_gen.go.
func GoSource(cols []Column) []byte {
	var b strings.Builder
	b.WriteString("// Code generated by go generate (internal/gencolumns) from the schemas doc comments; DO NOT EDIT.\n\n")
	b.WriteString("package release\n\n")
	b.WriteString("// columnDocs documents every Parquet column of the archive, in schema order.\n")
	b.WriteString("var columnDocs = []columnDoc{\n")
	for _, c := range cols {
		fmt.Fprintf(&b, "\t{%q, %q},\n", c.Path, c.Doc)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// Paths returns the column paths, sorted (for comparisons in tests).
func Paths(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Path
	}
	sort.Strings(out)
	return out
}
