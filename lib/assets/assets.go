// Package assets resolves the files tau2rl needs but does not ship — the τ²-bench data directory
// and the Qwen3 tokenizer — in one documented order, for every binary, the tests and the Makefile
// (docs/ASSETS.md):
//
//  1. an explicit directory (a flag or config key), then the asset's environment variable
//     (TAU2_DATA_DIR, QWEN3_TOKENIZER_DIR);
//  2. ../shared/<name> next to the working directory or one of its parents (the development and
//     CI layout);
//  3. the cache, $TAU2RL_CACHE_DIR or $XDG_CACHE_HOME/tau2rl or ~/.cache/tau2rl, holding a
//     previous download of the pinned revision;
//  4. a download of the pinned revision (tau2-bench's GitHub archive tarball at a fixed commit;
//     the tokenizer from Hugging Face at a fixed commit), every file checked against its pinned
//     sha256 before the cache directory is renamed into place, with a progress bar on stderr.
//
// With TAU2RL_OFFLINE=1 (or when the download fails) resolution ends with an error that names
// the environment variable to set and the URLs it would have fetched. The package imports only
// the standard library so that tau2/data and lib/inference/tokenizer can use it.
package assets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tau2rl/lib/durable"
)

// File is one file of an asset, relative to the asset's root, with its pinned sha256.
type File struct {
	Path   string
	SHA256 string
	// Size is the expected size in bytes (0: unknown); only used for the progress bar.
	Size int64
}

// Source is one download: a gzip-compressed tar archive (GitHub's archive tarballs: one top
// directory, stripped) or a single file.
type Source struct {
	// URL is fetched with GET.
	URL string
	// Archive is true for a .tar.gz; false for a single file (Files has exactly one entry).
	Archive bool
	// Strip is removed from the front of archive paths after the top directory ("data/").
	Strip string
	// Dest is prepended to the stripped path to give the path under the asset root.
	Dest string
	// Files are what this source must provide, by path under the asset root; an archive's
	// other entries are ignored.
	Files []File
}

// Asset describes one resolvable directory.
type Asset struct {
	// Name names the asset in messages and under ../shared and the cache.
	Name string
	// EnvVar is the environment variable that points at a directory holding it.
	EnvVar string
	// Marker is a path every valid directory has (a file or a directory).
	Marker string
	// Revision names the pinned revision; the cache directory is <cache>/<Name>-<Revision>.
	Revision string
	// Sources download the pinned revision.
	Sources []Source
	// Verify, when set, replaces the sha256 comparison of files (used for content digests);
	// it gets the file's path under the root, its pin and the written file's path.
	Verify func(f File, path string) error
}

// Options tune Resolve; the zero value plus the environment is what binaries use.
type Options struct {
	// Dir is an explicit directory (a flag or config key); when set it is the only candidate.
	Dir string
	// CacheDir overrides the cache root (default: $TAU2RL_CACHE_DIR, $XDG_CACHE_HOME/tau2rl,
	// ~/.cache/tau2rl).
	CacheDir string
	// NoShared skips ../shared (tests of the download path).
	NoShared bool
	// Offline forbids the download (default: $TAU2RL_OFFLINE is 1 or true).
	Offline bool
	// Client makes the requests (default: an http.Client with a 30-minute timeout).
	Client *http.Client
	// Progress receives the progress bar (default os.Stderr; io.Discard silences it).
	Progress io.Writer
}

// EnvOffline and EnvCacheDir are the environment variables Options defaults read.
const (
	EnvOffline  = "TAU2RL_OFFLINE"
	EnvCacheDir = "TAU2RL_CACHE_DIR"
)

// completeMarker is written last into a finished cache directory.
const completeMarker = ".tau2rl-complete"

// Resolve returns the absolute directory of asset a, following the package's order.
func Resolve(ctx context.Context, a Asset, o Options) (string, error) {
	loc, err := Locate(a, o)
	if err != nil || loc.Dir != "" {
		return loc.Dir, err
	}
	hint := fmt.Sprintf("set %s to a directory holding it (with %s), or put it at ../shared/%s", a.EnvVar, a.Marker, a.Name)
	if loc.Offline {
		return "", fmt.Errorf("assets: %s not found and downloads are off ($%s); %s, or allow the download of %s into %s: %w",
			a.Name, EnvOffline, hint, urls(a), loc.Cache, ErrNotFound)
	}
	dir, err := download(ctx, a, o, loc.Cache)
	if err != nil {
		return "", fmt.Errorf("assets: %s not found locally and the download failed (%w); %s, or run again online (it fetches %s into %s): %w",
			a.Name, err, hint, urls(a), loc.Cache, ErrNotFound)
	}
	return dir, nil
}

// Location is where Locate found an asset without downloading it.
type Location struct {
	// Dir is the absolute directory ("" when only a download would provide it).
	Dir string
	// From says which step of the order gave Dir: "directory" (Options.Dir, a config key),
	// "$ENV_VAR", "../shared" or "cache"; "" when Dir is "".
	From string
	// Cache is the cache directory a download would fill (when Dir is "").
	Cache string
	// Offline is true when Dir is "" and downloads are off.
	Offline bool
}

// Locate runs steps 1–3 of the order (an explicit directory or the environment variable,
// ../shared, the cache) and never downloads: a Location with an empty Dir means step 4 would
// run. An explicit directory or variable that lacks the asset is an error (wrapping ErrNotFound),
// as in Resolve; so is the lack of any cache directory when nothing local was found.
func Locate(a Asset, o Options) (Location, error) {
	check := func(d, from string) (Location, error) {
		abs, err := filepath.Abs(d)
		if err != nil {
			return Location{}, fmt.Errorf("assets: %s: %s %q: %w", a.Name, from, d, err)
		}
		if _, err := os.Stat(filepath.Join(abs, a.Marker)); err != nil {
			return Location{}, fmt.Errorf("assets: %s: %s %q has no %s: %w", a.Name, from, d, a.Marker, ErrNotFound)
		}
		return Location{Dir: abs, From: from}, nil
	}
	if o.Dir != "" {
		return check(o.Dir, "directory")
	}
	if d := os.Getenv(a.EnvVar); d != "" {
		return check(d, "$"+a.EnvVar)
	}
	if !o.NoShared {
		if d, ok := findShared(a); ok {
			return Location{Dir: d, From: "../shared"}, nil
		}
	}
	root, err := cacheRoot(o)
	if err != nil {
		return Location{}, fmt.Errorf("assets: %s not found and no cache directory (%v); set %s to a directory holding it (with %s), or put it at ../shared/%s: %w",
			a.Name, err, a.EnvVar, a.Marker, a.Name, ErrNotFound)
	}
	dir := filepath.Join(root, a.Name+"-"+a.Revision)
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return Location{Dir: dir, From: "cache"}, nil
	}
	return Location{Cache: root, Offline: o.Offline || truthy(os.Getenv(EnvOffline))}, nil
}

// Describe says in one line where asset a resolves for a binary's key value dir ("" for the
// order), without downloading: "tau2-data: /srv/shared/tau2-data (from ../shared)", or what the
// first run would download, or why it cannot be found. Binaries print it under --print-config,
// so a user sees where the data and the tokenizer come from before anything runs.
func Describe(a Asset, dir string) string {
	loc, err := Locate(a, Options{Dir: dir})
	switch {
	case err != nil:
		return fmt.Sprintf("%s: NOT FOUND: %v", a.Name, err)
	case loc.Dir != "":
		return fmt.Sprintf("%s: %s (from %s)", a.Name, loc.Dir, loc.From)
	case loc.Offline:
		return fmt.Sprintf("%s: NOT FOUND locally and downloads are off ($%s): set %s or put it at ../shared/%s",
			a.Name, EnvOffline, a.EnvVar, a.Name)
	default:
		return fmt.Sprintf("%s: not found locally; the first run downloads the pinned revision into %s (set %s or put it at ../shared/%s to use a local copy)",
			a.Name, filepath.Join(loc.Cache, a.Name+"-"+a.Revision), a.EnvVar, a.Name)
	}
}

func truthy(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return s == "1" || s == "true" || s == "yes"
}

func urls(a Asset) string {
	var u []string
	for _, s := range a.Sources {
		u = append(u, s.URL)
	}
	return strings.Join(u, " and ")
}

// findShared looks for ../shared/<Name> from the working directory and each of its parents.
func findShared(a Asset) (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(filepath.Dir(d), "shared", a.Name)
		if _, err := os.Stat(filepath.Join(cand, a.Marker)); err == nil {
			return filepath.Clean(cand), true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

func cacheRoot(o Options) (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	if d := os.Getenv(EnvCacheDir); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "tau2rl"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "tau2rl"), nil
}

// download fetches every source into a temporary directory beside the final one, checks every
// pinned file, writes the completion marker and renames the directory into place, so the cache
// never holds a partial revision (a crash leaves a .tmp-* directory, removed by the next try).
func download(ctx context.Context, a Asset, o Options, root string) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(root, a.Name+"-"+a.Revision)
	stale, _ := filepath.Glob(filepath.Join(root, ".tmp-"+a.Name+"-"+a.Revision+"-*"))
	for _, s := range stale {
		os.RemoveAll(s)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+a.Name+"-"+a.Revision+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	client := o.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Minute}
	}
	progress := o.Progress
	if progress == nil {
		progress = os.Stderr
	}
	for _, s := range a.Sources {
		if err := fetchSource(ctx, client, progress, a, s, tmp); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(a.Revision+"\n"), 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(final) // an incomplete directory without the marker
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	// The rename is what makes the download visible; sync the cache directory so that it
	// survives a crash (the next run would otherwise download everything again).
	if err := durable.SyncDir(filepath.Dir(final)); err != nil {
		return "", fmt.Errorf("assets: %w", err)
	}
	return final, nil
}

func fetchSource(ctx context.Context, client *http.Client, progress io.Writer, a Asset, s Source, tmp string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", s.URL, resp.Status)
	}
	bar := newBar(progress, a.Name+" "+filepath.Base(s.URL), resp.ContentLength)
	defer bar.done()
	body := io.TeeReader(resp.Body, bar)
	want := map[string]File{}
	for _, f := range s.Files {
		want[f.Path] = f
	}
	got := map[string]bool{}
	write := func(rel string, r io.Reader) error {
		f := want[rel]
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, cerr := io.Copy(io.MultiWriter(out, h), r)
		if err := errors.Join(cerr, out.Sync(), out.Close()); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if a.Verify != nil {
			if err := a.Verify(f, p); err != nil {
				return fmt.Errorf("%s from %s: %w", rel, s.URL, err)
			}
		} else if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
			return fmt.Errorf("%s from %s: sha256 %s, pinned %s: %w", rel, s.URL, sum, f.SHA256, ErrChecksum)
		}
		got[rel] = true
		return nil
	}
	if s.Archive {
		if err := untar(body, s, want, write); err != nil {
			return err
		}
	} else {
		if len(s.Files) != 1 {
			return fmt.Errorf("assets: source %s: a single-file source needs exactly one file", s.URL)
		}
		if err := write(s.Files[0].Path, body); err != nil {
			return err
		}
	}
	var missing []string
	for _, f := range s.Files {
		if !got[f.Path] {
			missing = append(missing, f.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %d pinned files (%s): %w", s.URL, len(missing), strings.Join(missing, ", "), ErrNotFound)
	}
	return nil
}
