package deploytest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// PromQLMetricNames returns the metric names an expression selects: every
// identifier that is not a function, keyword, label name, grouping label,
// range, or Grafana $variable. Recording-rule names (with a colon) are
// included; callers resolve them against the rule files.
func PromQLMetricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, `""`)
	s = matchers.ReplaceAllString(s, " ")
	s = ranges.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	s = variables.ReplaceAllString(s, "1")
	seen := map[string]bool{}
	var out []string
	for _, loc := range ident.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promqlKeywords[strings.ToLower(name)] {
			continue
		}
		if loc[0] > 0 && (isDigit(s[loc[0]-1]) || s[loc[0]-1] == '.') {
			continue // the exponent or suffix of a number (1e12, 5m)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers  = regexp.MustCompile(`\{[^{}]*\}`)
	ranges    = regexp.MustCompile(`\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	variables = regexp.MustCompile(`\$\{?\w+\}?`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

	promqlKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true,
		"ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "atan2": true,
	}
)

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// CodeMetrics indexes the Prometheus metric names the Go code can register:
// the string literals of every non-test file that imports client_golang's
// prometheus package, so a name is found whether it is written whole
// ("tau2rl_kafka_consumer_lag") or assembled from Namespace, Subsystem and Name
// literals of the same file ("tau2rl_trainer" + "step_seconds").
type CodeMetrics struct {
	files []map[string]bool // string literals per prometheus-importing file
}

// ScanCodeMetrics parses the Go files under root (skipping tests, testdata,
// node_modules and hidden directories).
func ScanCodeMetrics(root string) (*CodeMetrics, error) {
	cm := &CodeMetrics{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil // a file mid-edit elsewhere in the tree; the build tests report it
		}
		imports := false
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "github.com/prometheus/client_golang/prometheus" {
				imports = true
			}
		}
		if !imports {
			return nil
		}
		lits := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if v, err := strconv.Unquote(bl.Value); err == nil && v != "" && !strings.ContainsAny(v, " \n") {
					lits[v] = true
				}
			}
			return true
		})
		cm.files = append(cm.files, lits)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deploytest: scan metrics: %w", err)
	}
	return cm, nil
}

// Has reports whether the code defines metric name (a histogram's _bucket,
// _sum and _count series and a summary's _sum and _count count as their
// family's).
func (cm *CodeMetrics) Has(name string) bool {
	cands := []string{name}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(name, suf) {
			cands = append(cands, strings.TrimSuffix(name, suf))
		}
	}
	for _, lits := range cm.files {
		for _, c := range cands {
			if composed(lits, c, 3) {
				return true
			}
		}
	}
	return false
}

// composed reports whether name is a literal, or a literal followed by
// composed (joined directly, as "prefix_" + name, or with the "_" that
// Namespace_Subsystem_Name inserts), with at most parts pieces in all.
func composed(lits map[string]bool, name string, parts int) bool {
	if lits[name] {
		return true
	}
	if parts <= 1 {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !lits[name[:i]] {
			continue
		}
		rest := name[i:]
		if composed(lits, rest, parts-1) || (rest[0] == '_' && len(rest) > 1 && composed(lits, rest[1:], parts-1)) {
			return true
		}
	}
	return false
}
