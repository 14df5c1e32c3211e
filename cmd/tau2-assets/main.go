// Command tau2-assets resolves — and on a fresh clone downloads into the cache — the files tau2rl
// needs but does not ship: the τ²-bench data directory and the Qwen3 tokenizer (lib/assets,
// docs/ASSETS.md). `make run` calls it first, so a clone without ../shared works; it prints the
// directories it found and exits 1 with what to set when one cannot be found.
package main

import (
	"context"
	"fmt"
	"os"

	"tau2rl/lib/assets"
)

const usage = `tau2-assets — find or download the τ² data and the Qwen3 tokenizer

Order (docs/ASSETS.md): $TAU2_DATA_DIR / $QWEN3_TOKENIZER_DIR, then ../shared/<name>,
then the cache ($TAU2RL_CACHE_DIR, $XDG_CACHE_HOME/tau2rl or ~/.cache/tau2rl), then a
download of the pinned revision (sha256-checked). TAU2RL_OFFLINE=1 forbids the download.
Prints NAME=DIR lines (shell syntax) on success.`

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] == "--help" || os.Args[1] == "-h" {
			fmt.Println(usage)
			return
		}
		fmt.Fprintf(os.Stderr, "tau2-assets: unexpected argument %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	failed := false
	for _, a := range []assets.Asset{assets.Tau2Data, assets.Qwen3Tokenizer} {
		dir, err := assets.Resolve(context.Background(), a, assets.Options{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "tau2-assets: %v\n", err)
			failed = true
			continue
		}
		fmt.Printf("%s=%s\n", a.EnvVar, dir)
	}
	if failed {
		os.Exit(1)
	}
}
