# tau2rl — build, test and run the whole pipeline.
#   make run    install what is needed, then run producer → embedded Kafka → archiver + trainer, with progress
#   make test   vet and test everything (pure Go; no GPU needed; installs nothing: see make deps)
#   make deps   install the system tools some tests use (kcat, promtool, systemd-analyze, npm), saying what and why first
#   make query DATASET=DIR [SQL="SELECT …"]   SQL over a Parquet dataset (DuckDB linked in: nothing to install)
#   make bench  the benchmarks behind docs/PERFORMANCE.md
#   make lint   gofmt, go vet, staticcheck
#   make gpu / gpu-test / gpu-bench   the CUDA backend (needs nvcc and a GPU; see gpu/cuda/gpu.mk)

SHELL         := /bin/bash
GO            ?= go
BIN           ?= bin
# The τ² data and the Qwen3 tokenizer are found by lib/assets (docs/ASSETS.md):
# $TAU2_DATA_DIR / $QWEN3_TOKENIZER_DIR, ../shared, the cache, or a pinned,
# sha256-checked download (`make assets`; TAU2RL_OFFLINE=1 forbids it).

BINARIES := tau2-producer tau2-archiver tau2-trainer tau2-replay tau2-eval tau2-broker tau2-scripted-llm tau2-sampler tau2-proxy tau2-run tau2-assets tau2-query
TEST_TIMEOUT ?= 40m
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run assets query learn learn-cpu test test-short bench lint deps deps-check deps-system deps-npm clean

all: build

# build shows progress: the package count first, a line every few seconds and one per binary
# (a first build compiles ~500 packages: minutes on two cores).
build:
	@GO=$(GO) bash deploy/scripts/build.sh $(BIN) $(BINARIES)

# deps installs what some tests use besides Go modules: kcat (an independent Kafka client),
# promtool (validates the monitoring rules), systemd-analyze (verifies the units) and the npm
# packages that serve as Hugging Face reference oracles. It installs only what is missing, says
# what and why first and asks (DEPS_ARGS=--yes answers yes; CI passes it). Nothing else runs it:
# make test and make run install nothing, and the tests that need a missing tool skip saying so
# (CI sets TAU2RL_REQUIRE_TOOLS=1, which turns those skips into failures).
deps: deps-system deps-npm

deps-system:
	@bash deploy/scripts/install-deps.sh $(DEPS_ARGS)

deps-check:
	@bash deploy/scripts/install-deps.sh --check

deps-npm:
	@for d in $$(find . -name package-lock.json -not -path '*/node_modules/*' -exec dirname {} \;); do \
	  if [ ! -d $$d/node_modules ]; then echo "npm ci in $$d (its package-lock.json: Hugging Face oracles for the tests, installed in that directory only)"; (cd $$d && npm ci --no-audit --no-fund --loglevel=error) || exit 1; fi; \
	done

# assets resolves (or downloads into the cache) the τ² data and the tokenizer.
assets: build
	@$(BIN)/tau2-assets >/dev/null

run: build assets
	@$(BIN)/tau2-run bin=$(BIN) $(RUN_ARGS)

# learn is the learning experiment on one GPU (docs/LEARNING.md): demonstrations → SFT → GRPO with
# tau2-sampler and the CUDA trainer → pass^k before/after → report and figures in run/<time>/.
# learn-cpu runs every stage at a tiny scale on the pure-Go backend with the scripted stand-in.
learn: build gpu-trainer gpu-sampler
	@$(BIN)/tau2-run experiment bin=$(BIN) policy=sampler backend=cuda heldout_split=test $(LEARN_ARGS)

learn-cpu: build
	@$(BIN)/tau2-run experiment bin=$(BIN) policy=scripted backend=cpu domain=mock split=base \
	    model_config=deploy/models/qwen3-tiny/config.json tasks=2 demo_trials=2 sft_min_reward=0 sft_max_steps=1 \
	    grpo_steps=1 group_size=2 batch_size=1 eval_trials=2 $(LEARN_ARGS)

# query runs SQL over a Parquet dataset (a tau2-run's run/<time>/dataset, an archive, a release)
# with tau2-query, which links DuckDB: DATASET=DIR, and SQL="…" (default: mean reward per domain
# and policy version; the view trajectories is the dataset, ARCHIVE in the SQL its directory).
query:
	@test -n "$(DATASET)" || { echo 'make query: set DATASET=DIR (e.g. DATASET=run/<time>/dataset), and SQL="…" for your own query' >&2; exit 2; }
	@GO=$(GO) bash deploy/scripts/build.sh $(BIN) tau2-query >/dev/null
	@$(BIN)/tau2-query dataset="$(DATASET)" $(if $(SQL),sql="$(SQL)")

test: deps-check
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

test-short: deps-check
	$(GO) test -count=1 -short ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 90m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# The cuda-tagged Go code (cgo over plain-C headers) type-checks without CUDA: keep it compiling.
	if command -v gcc >/dev/null; then $(GO) vet -tags cuda ./gpu/... ./cmd/tau2-trainer/ ./cmd/tau2-sampler/; fi
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN)

-include gpu/cuda/gpu.mk
