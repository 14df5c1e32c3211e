package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "tau2rl"

// knownExceptions are imports allowed against the Rooms table. There are none: the shared data
// formats that once ran back up (trainer/sft reading consumers' dataset and release packages,
// consumers/figures reading the trainer's step log) now live below both rooms, in schemas/
// (issue 31). The test fails on any violation, and on an exception listed here that no longer
// occurs; prefer moving the shared code to adding a line.
var knownExceptions []exception

// forbiddenExternal are modules a room must not import whatever the table says:
// docs/ARCHITECTURE.md's gpu row, "Pure compute: no stream, no Arrow".
var forbiddenExternal = map[string][]string{
	"gpu": {"github.com/apache/arrow", "github.com/segmentio/kafka-go", "github.com/twmb/franz-go"},
}

// pkg is the part of `go list -json` this test reads.
type pkg struct {
	ImportPath   string
	Name         string
	Doc          string
	GoFiles      []string
	CgoFiles     []string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// exception is one package-level import allowed against the table.
type exception struct{ from, to string }

func (e exception) String() string { return e.from + " → " + e.to }

// room is one row of the Rooms table: a path prefix and the rooms it may import (its own
// packages always); any is the "any" of cmd/ and deploy/.
type room struct {
	path    string
	imports []string
	any     bool
}

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside the tau2rl module")
	}
	return filepath.Dir(gomod)
}

// list runs `go list -e -json` over the module with the build tags given.
func list(t *testing.T, dir, tags string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (tags %q): %v\n%s", tags, err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages: not the whole module?", len(pkgs))
	}
	return pkgs
}

var (
	cellRoom = regexp.MustCompile("^`([^`]+)`$")
	backtick = regexp.MustCompile("`([^`]+)`")
	aside    = regexp.MustCompile(`\([^()]*\)`)
)

// parseRooms reads the "## Rooms" table of docs/ARCHITECTURE.md: the first column names a room
// (`trainer/`), the last its allowed imports: "any", "nothing of the project", or backticked
// rooms (`schemas`, `lib`), where text outside backticks, and anything in parentheses, is
// commentary.
func parseRooms(r io.Reader) ([]room, error) {
	var rooms []room
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Rooms"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("rooms table row %q: want room | holds | depends on", line)
		}
		m := cellRoom.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			continue // the header and its rule
		}
		rm := room{path: strings.TrimSuffix(m[1], "/")}
		deps := strings.TrimSpace(cells[len(cells)-1])
		switch {
		case deps == "any" || strings.HasPrefix(deps, "any "):
			rm.any = true
		case strings.HasPrefix(deps, "nothing"):
		default:
			for _, b := range backtick.FindAllStringSubmatch(aside.ReplaceAllString(deps, ""), -1) {
				rm.imports = append(rm.imports, strings.TrimSuffix(b[1], "/"))
			}
			if len(rm.imports) == 0 && deps != "" {
				return nil, fmt.Errorf("room %s: depends-on cell %q names no `room`", rm.path, deps)
			}
		}
		rooms = append(rooms, rm)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rooms) == 0 {
		return nil, errors.New(`no "## Rooms" table`)
	}
	// Longest path first, so lib/inference/scripted is found before lib.
	sort.SliceStable(rooms, func(i, j int) bool { return len(rooms[i].path) > len(rooms[j].path) })
	return rooms, nil
}

// under reports whether package path p (module-relative) is prefix or below it.
func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

func roomOf(rooms []room, p string) (room, bool) {
	for _, r := range rooms {
		if under(p, r.path) {
			return r, true
		}
	}
	return room{}, false
}

// check returns every import of pkgs that the rooms do not allow and no exception covers, and
// every exception that no import uses. Test files may import any room but cmd/ and deploy/ (an
// end-to-end test runs a producer into a consumer, gpu's tests pack with trainer/prefixtree); what
// ships is held to the table.
func check(pkgs []pkg, rooms []room, exceptions []exception) []string {
	var bad []string
	used := map[exception]bool{}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		if p.Error != nil {
			bad = append(bad, fmt.Sprintf("%s: go list: %s", from, p.Error.Err))
			continue
		}
		fr, ok := roomOf(rooms, from)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no room of docs/ARCHITECTURE.md's Rooms table: add a row for it", from))
			continue
		}
		for _, imp := range p.Imports {
			for _, f := range forbiddenExternal[fr.path] {
				if under(imp, f) {
					bad = append(bad, fmt.Sprintf("%s imports %s: room %s/ must not depend on it", from, imp, fr.path))
				}
			}
			to, ok := rel(imp)
			if !ok || fr.any || under(to, fr.path) {
				continue
			}
			tr, ok := roomOf(rooms, to)
			if ok && slices.ContainsFunc(fr.imports, func(a string) bool { return under(tr.path, a) || under(to, a) }) {
				continue
			}
			if e := (exception{from, to}); slices.Contains(exceptions, e) {
				used[e] = true
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s: room %s/ may import only %v (docs/ARCHITECTURE.md, Rooms); move the shared code below both rooms, or change the table if the design changed",
				from, to, fr.path, fr.imports))
		}
		if fr.any {
			continue
		}
		for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
			if to, ok := rel(imp); ok && (under(to, "cmd") || under(to, "deploy")) {
				bad = append(bad, fmt.Sprintf("a test of %s imports %s: only cmd/ and deploy/ tests may use the binaries' packages", from, to))
			}
		}
	}
	for _, e := range exceptions {
		if !used[e] {
			bad = append(bad, fmt.Sprintf("known exception %s no longer occurs: delete it from knownExceptions", e))
		}
	}
	return bad
}

func readRooms(t *testing.T, dir string) []room {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rooms, err := parseRooms(f)
	if err != nil {
		t.Fatalf("docs/ARCHITECTURE.md: %v", err)
	}
	return rooms
}

// TestImportsFollowTheRoomsTable: every import of every package of the module, in the default
// and the cuda build, is allowed by docs/ARCHITECTURE.md's Rooms table or is one of the
// knownExceptions, and every package is in a room of the table.
func TestImportsFollowTheRoomsTable(t *testing.T) {
	dir := root(t)
	rooms := readRooms(t, dir)
	for _, want := range []string{"schemas", "lib", "tau2", "producers", "consumers", "trainer", "gpu", "cmd"} {
		if _, ok := roomOf(rooms, want); !ok {
			t.Fatalf("the Rooms table has no row for %s/", want)
		}
	}
	for _, tags := range []string{"", "cuda"} {
		for _, v := range check(list(t, dir, tags), rooms, knownExceptions) {
			t.Errorf("tags %q: %s", tags, v)
		}
	}
}

// TestCheck: the checker itself, on a made-up module: allowed imports pass, a new arrow back up
// fails, an exception covers exactly its import, a stale exception fails, a package outside every
// room fails, a forbidden module fails, and tests may not reach cmd/.
func TestCheck(t *testing.T) {
	table := "## Rooms\n\n| room | holds | depends on |\n|---|---|---|\n" +
		"| `schemas/` | contract | nothing of the project |\n" +
		"| `lib/` | plumbing | `schemas` |\n" +
		"| `lib/special` | odd one | `schemas`, `trainer` (why) |\n" +
		"| `trainer/` | trainer | `schemas`, `lib` (not `consumers`), `gpu` |\n" +
		"| `consumers/` | readers | `schemas`, `lib` |\n" +
		"| `gpu/` | compute | `lib` |\n" +
		"| `cmd/` | mains | any |\n\n## Next\n| `ignored/` | x | `y` |\n"
	rooms, err := parseRooms(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	if len(rooms) != 7 {
		t.Fatalf("%d rooms: %+v", len(rooms), rooms)
	}
	p := func(path string, imps ...string) pkg {
		q := pkg{ImportPath: module + "/" + path}
		for _, i := range imps {
			if strings.Contains(i, ".") || i == "fmt" { // another module, the standard library
				q.Imports = append(q.Imports, i)
			} else {
				q.Imports = append(q.Imports, module+"/"+i)
			}
		}
		return q
	}
	cases := []struct {
		name string
		pkgs []pkg
		exc  []exception
		want []string // substrings, one per violation, in order
	}{
		{name: "allowed", pkgs: []pkg{p("trainer/step", "trainer/loss", "schemas", "lib/durable", "gpu/dp", "fmt"), p("cmd/x", "trainer/step", "consumers/a"), p("lib/special/y", "trainer/z")}},
		{name: "arrow back up", pkgs: []pkg{p("consumers/fig", "trainer/steplog")}, want: []string{"consumers/fig imports trainer/steplog"}},
		{name: "a room in parentheses is commentary", pkgs: []pkg{p("trainer/sft", "consumers/dataset")}, want: []string{"trainer/sft imports consumers/dataset"}},
		{name: "lib above its room", pkgs: []pkg{p("lib/durable", "trainer/z")}, want: []string{"lib/durable imports trainer/z"}},
		{name: "exception", pkgs: []pkg{p("consumers/fig", "trainer/steplog")}, exc: []exception{{"consumers/fig", "trainer/steplog"}}},
		{name: "exception is per package", pkgs: []pkg{p("consumers/other", "trainer/steplog"), p("consumers/fig", "trainer/steplog")},
			exc: []exception{{"consumers/fig", "trainer/steplog"}}, want: []string{"consumers/other imports trainer/steplog"}},
		{name: "stale exception", exc: []exception{{"consumers/fig", "trainer/steplog"}}, want: []string{"no longer occurs"}},
		{name: "no room", pkgs: []pkg{p("newroom/x")}, want: []string{"newroom/x is in no room"}},
		{name: "forbidden module", pkgs: []pkg{p("gpu/x", "github.com/apache/arrow/go/v18/arrow")}, want: []string{"must not depend"}},
		{name: "test reaches cmd", pkgs: []pkg{{ImportPath: module + "/trainer/q", XTestImports: []string{module + "/cmd/internal/cli"}}}, want: []string{"a test of trainer/q imports cmd/internal/cli"}},
		{name: "cmd tests may", pkgs: []pkg{{ImportPath: module + "/cmd/q", TestImports: []string{module + "/cmd/internal/cli"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check(c.pkgs, rooms, c.exc)
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Fatalf("violation %q, want %q", got[i], w)
				}
			}
		})
	}
	if _, err := parseRooms(strings.NewReader("## Rooms\n| `x/` | y | depends on lots |\n")); err == nil {
		t.Fatal("a depends-on cell naming no room was accepted")
	}
	if _, err := parseRooms(strings.NewReader("# nothing\n")); err == nil {
		t.Fatal("a document without the table was accepted")
	}
}

// TestPackageDocs: every package that is not a command has a doc comment "// Package <name> ...",
// in the default and the cuda build (a reader of pkg.go.dev or `go doc` sees what it is for).
func TestPackageDocs(t *testing.T) {
	dir := root(t)
	for _, tags := range []string{"", "cuda"} {
		for _, p := range list(t, dir, tags) {
			if p.Name == "main" || len(p.GoFiles)+len(p.CgoFiles) == 0 {
				continue // commands; folders of tests only
			}
			if !strings.HasPrefix(p.Doc, "Package "+p.Name+" ") {
				t.Errorf("tags %q: %s has no package doc comment (`// Package %s ...` in doc.go or its main file); go list reads %q",
					tags, p.ImportPath, p.Name, p.Doc)
			}
		}
	}
}
