package logs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/lib/proc"
)

// TestNoGlobalLoggerInLibraries: outside cmd/ (where cli sets the process logger) no non-test Go
// file calls slog.Default() or the package-level slog.Info/Warn/Error/Debug/Log, which log
// through it: a library logs to the logger its caller gave it, or nowhere (OrDiscard).
func TestNoGlobalLoggerInLibraries(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	global := map[string]bool{"Default": true, "Info": true, "Warn": true, "Error": true, "Debug": true, "Log": true,
		"InfoContext": true, "WarnContext": true, "ErrorContext": true, "DebugContext": true, "LogAttrs": true}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "cmd" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		slogName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"log/slog"` {
				slogName = "slog"
				if imp.Name != nil {
					slogName = imp.Name.Name
				}
			}
		}
		if slogName == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == slogName && global[sel.Sel.Name] {
				t.Errorf("%s: slog.%s(): take a *slog.Logger from the caller (nil: logs.OrDiscard)", rel, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files read under %s: the walk is broken", files, root)
	}
}
