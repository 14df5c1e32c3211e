package assets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// tarball builds a GitHub-style archive: every entry under one top directory.
func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "tau2-bench-abc123/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.WriteHeader(&tar.Header{Name: "tau2-bench-abc123/data/link", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink})
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// server serves the archive and a single file on loopback and counts requests.
func server(t *testing.T, archive []byte, single string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		switch r.URL.Path {
		case "/archive/abc123.tar.gz":
			w.Write(archive)
		case "/resolve/tok.json":
			w.Write([]byte(single))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

const (
	tasks  = `[{"id": "0"}]`
	policy = "# policy\n"
	tok    = `{"model": {"vocab": {"a": 0}}}`
)

func testAsset(url string) Asset {
	return Asset{
		Name: "test-data", EnvVar: "TAU2RL_TEST_ASSET_DIR", Marker: "tau2/domains", Revision: "abc123",
		Sources: []Source{
			{URL: url + "/archive/abc123.tar.gz", Archive: true, Strip: "data/", Files: []File{
				{Path: "tau2/domains/mock/tasks.json", SHA256: sum([]byte(tasks))},
				{Path: "tau2/domains/mock/policy.md", SHA256: sum([]byte(policy))},
			}},
			{URL: url + "/resolve/tok.json", Files: []File{{Path: "extra/tokenizer.json", SHA256: sum([]byte(tok))}}},
		},
	}
}

func archiveFiles() map[string]string {
	return map[string]string{
		"data/tau2/domains/mock/tasks.json":  tasks,
		"data/tau2/domains/mock/policy.md":   policy,
		"data/tau2/domains/mock/ignored.txt": "not pinned, not extracted",
		"src/tau2/code.py":                   "print()",
		"data/../../escape.json":             "never written",
	}
}

func TestDownloadVerifiesAndCaches(t *testing.T) {
	srv, n := server(t, tarball(t, archiveFiles()), tok)
	cache := t.TempDir()
	var progress bytes.Buffer
	a := testAsset(srv.URL)
	dir, err := Resolve(context.Background(), a, Options{NoShared: true, CacheDir: cache, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "test-data-abc123"); dir != want {
		t.Fatalf("dir %s, want %s", dir, want)
	}
	for rel, body := range map[string]string{"tau2/domains/mock/tasks.json": tasks, "tau2/domains/mock/policy.md": policy, "extra/tokenizer.json": tok} {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || string(b) != body {
			t.Fatalf("%s: %q %v", rel, b, err)
		}
	}
	for _, absent := range []string{"tau2/domains/mock/ignored.txt", "link", "../escape.json"} {
		if _, err := os.Stat(filepath.Join(dir, absent)); err == nil {
			t.Errorf("%s extracted", absent)
		}
	}
	if !strings.Contains(progress.String(), "downloading test-data abc123.tar.gz") || !strings.Contains(progress.String(), "100%") {
		t.Errorf("progress bar output %q", progress.String())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(cache, ".tmp-*")); len(leftovers) != 0 {
		t.Errorf("temporary directories left: %v", leftovers)
	}
	// The second resolution is served from the cache, without a request.
	before := n.Load()
	srv.Close()
	dir2, err := Resolve(context.Background(), a, Options{NoShared: true, CacheDir: cache, Offline: true})
	if err != nil || dir2 != dir || n.Load() != before {
		t.Fatalf("cached resolve: %s %v (%d requests)", dir2, err, n.Load()-before)
	}
}

func TestDownloadChecksumMismatch(t *testing.T) {
	files := archiveFiles()
	files["data/tau2/domains/mock/tasks.json"] = `[{"id": "0"}, {"id": "tampered"}]`
	srv, _ := server(t, tarball(t, files), tok)
	cache := t.TempDir()
	_, err := Resolve(context.Background(), testAsset(srv.URL), Options{NoShared: true, CacheDir: cache, Progress: &bytes.Buffer{}})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "tau2/domains/mock/tasks.json") || !strings.Contains(err.Error(), "TAU2RL_TEST_ASSET_DIR") {
		t.Fatalf("err = %v, want a checksum error naming the file and the variable to set", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 0 {
		t.Fatalf("cache holds %v after a failed download", entries)
	}
}

func TestDownloadMissingPinnedFile(t *testing.T) {
	files := archiveFiles()
	delete(files, "data/tau2/domains/mock/policy.md")
	srv, _ := server(t, tarball(t, files), tok)
	_, err := Resolve(context.Background(), testAsset(srv.URL), Options{NoShared: true, CacheDir: t.TempDir(), Progress: &bytes.Buffer{}})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "policy.md") {
		t.Fatalf("err = %v, want the missing pinned file named", err)
	}
}

func TestOfflineFailsWithWhatToSet(t *testing.T) {
	srv, n := server(t, tarball(t, archiveFiles()), tok)
	a := testAsset(srv.URL)
	t.Setenv(EnvOffline, "1")
	_, err := Resolve(context.Background(), a, Options{NoShared: true, CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) || n.Load() != 0 {
		t.Fatalf("err = %v after %d requests, want ErrNotFound and no request", err, n.Load())
	}
	for _, want := range []string{"set TAU2RL_TEST_ASSET_DIR", "../shared/test-data", EnvOffline, srv.URL + "/archive/abc123.tar.gz"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Unreachable (the network is down): the same advice, with the cause.
	t.Setenv(EnvOffline, "")
	srv.Close()
	_, err = Resolve(context.Background(), a, Options{NoShared: true, CacheDir: t.TempDir(), Progress: &bytes.Buffer{}})
	if !errors.Is(err, ErrNotFound) && !strings.Contains(err.Error(), "download failed") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "set TAU2RL_TEST_ASSET_DIR") {
		t.Fatalf("error %q does not say what to set", err)
	}
}

func TestOrderEnvThenSharedThenCache(t *testing.T) {
	srv, n := server(t, tarball(t, archiveFiles()), tok)
	a := testAsset(srv.URL)
	envDir := t.TempDir()
	os.MkdirAll(filepath.Join(envDir, "tau2", "domains"), 0o755)
	t.Setenv(a.EnvVar, envDir)
	if d, err := Resolve(context.Background(), a, Options{CacheDir: t.TempDir()}); err != nil || d != envDir {
		t.Fatalf("env: %s %v", d, err)
	}
	t.Setenv(a.EnvVar, filepath.Join(envDir, "nope"))
	if _, err := Resolve(context.Background(), a, Options{CacheDir: t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a wrong $%s must be an error, not a fallback: %v", a.EnvVar, err)
	}
	t.Setenv(a.EnvVar, "")
	// ../shared/test-data next to a parent of the working directory.
	root := t.TempDir()
	shared := filepath.Join(root, "shared", "test-data")
	os.MkdirAll(filepath.Join(shared, "tau2", "domains"), 0o755)
	wd := filepath.Join(root, "repo", "cmd")
	os.MkdirAll(wd, 0o755)
	t.Chdir(wd)
	if d, err := Resolve(context.Background(), a, Options{CacheDir: t.TempDir()}); err != nil || d != shared {
		t.Fatalf("shared: %s %v", d, err)
	}
	if n.Load() != 0 {
		t.Fatalf("%d requests while a local copy exists", n.Load())
	}
}

// TestPinsMatchSharedCopies: the pinned sha256 of every τ² file and the tokenizer's content
// digest are those of ../shared (byte-identical to tau2-bench's blobs; the tokenizer copy is a
// minified one, hence the content digest).
func TestPinsMatchSharedCopies(t *testing.T) {
	data, err := Resolve(context.Background(), Tau2Data, Options{Offline: true})
	if err != nil {
		t.Skipf("τ² data not available: %v", err)
	}
	for _, f := range append(append([]File(nil), tau2HeadFiles...), withDest("_versions/v0.2.1-0ed2fd8", tau2V021Files)...) {
		b, err := os.ReadFile(filepath.Join(data, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if sum(b) != f.SHA256 || int64(len(b)) != f.Size {
			t.Errorf("%s: sha256 %s (%d bytes), pinned %s (%d)", f.Path, sum(b), len(b), f.SHA256, f.Size)
		}
	}
	tokDir, err := Resolve(context.Background(), Qwen3Tokenizer, Options{Offline: true})
	if err != nil {
		t.Skipf("tokenizer not available: %v", err)
	}
	if err := Qwen3Tokenizer.Verify(Qwen3Tokenizer.Sources[0].Files[0], filepath.Join(tokDir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
}

func withDest(dest string, fs []File) []File {
	out := make([]File, len(fs))
	for i, f := range fs {
		f.Path = dest + "/" + f.Path
		out[i] = f
	}
	return out
}

func TestTokenizerDigestIgnoresFormatting(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	b := filepath.Join(dir, "b.json")
	os.WriteFile(a, []byte(`{"model":{"vocab":{"x":0,"y":1,"xy":2},"merges":[["x","y"]]},"added_tokens":[{"id":3,"content":"<s>","special":true}]}`), 0o644)
	os.WriteFile(b, []byte("{\n  \"added_tokens\": [{\"special\": true, \"content\": \"<s>\", \"id\": 3}],\n  \"model\": {\n    \"merges\": [\"x y\"],\n    \"vocab\": {\"xy\": 2, \"x\": 0, \"y\": 1}\n  }\n}\n"), 0o644)
	da, err1 := TokenizerDigest(a)
	db, err2 := TokenizerDigest(b)
	if err1 != nil || err2 != nil || da != db {
		t.Fatalf("digests %s %s (%v %v)", da, db, err1, err2)
	}
	os.WriteFile(b, []byte(`{"model":{"vocab":{"x":0,"y":1,"xy":2},"merges":[["y","x"]]},"added_tokens":[{"id":3,"content":"<s>","special":true}]}`), 0o644)
	if dc, _ := TokenizerDigest(b); dc == da {
		t.Fatal("a different merge gives the same digest")
	}
}

// TestDescribeNeverDownloads: Describe (what --print-config prints) names the step of the order
// that found the asset, says what a first run would download, and never fetches anything.
func TestDescribeNeverDownloads(t *testing.T) {
	srv, n := server(t, tarball(t, archiveFiles()), tok)
	a := testAsset(srv.URL)
	cache := t.TempDir()
	t.Setenv(EnvCacheDir, cache)
	t.Setenv(EnvOffline, "")
	t.Setenv(a.EnvVar, "")
	t.Chdir(t.TempDir())
	if got := Describe(a, ""); !strings.Contains(got, "first run downloads") || !strings.Contains(got, cache) {
		t.Errorf("nothing local: %q", got)
	}
	t.Setenv(EnvOffline, "1")
	if got := Describe(a, ""); !strings.Contains(got, "NOT FOUND") || !strings.Contains(got, "set "+a.EnvVar) {
		t.Errorf("offline: %q", got)
	}
	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "tau2", "domains"), 0o755)
	if got, want := Describe(a, local), local+" (from directory)"; !strings.Contains(got, want) {
		t.Errorf("explicit directory: %q, want %q", got, want)
	}
	t.Setenv(a.EnvVar, local)
	if got, want := Describe(a, ""), local+" (from $"+a.EnvVar+")"; !strings.Contains(got, want) {
		t.Errorf("variable: %q, want %q", got, want)
	}
	t.Setenv(a.EnvVar, filepath.Join(local, "nope"))
	if got := Describe(a, ""); !strings.Contains(got, "NOT FOUND") {
		t.Errorf("a wrong variable: %q", got)
	}
	if n.Load() != 0 {
		t.Fatalf("Describe made %d requests", n.Load())
	}
}
