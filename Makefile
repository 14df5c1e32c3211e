# tau2rl — build, test and run the whole pipeline.
#   make run    install what is needed, then run producer → embedded Kafka → archiver + trainer, with progress
#   make test   vet and test everything (pure Go; no GPU needed)
#   make bench  the benchmarks behind docs/PERFORMANCE.md
#   make lint   gofmt, go vet, staticcheck
#   make gpu / gpu-test / gpu-bench   the CUDA backend (needs nvcc and a GPU; see gpu/cuda/gpu.mk)

SHELL         := /bin/bash
GO            ?= go
BIN           ?= bin
# The τ² data and the Qwen3 tokenizer are found by lib/assets (docs/ASSETS.md):
# $TAU2_DATA_DIR / $QWEN3_TOKENIZER_DIR, ../shared, the cache, or a pinned,
# sha256-checked download (`make assets`; TAU2RL_OFFLINE=1 forbids it).

BINARIES := tau2-producer tau2-archiver tau2-trainer tau2-replay tau2-eval tau2-broker tau2-scripted-llm tau2-sampler tau2-proxy tau2-run tau2-assets
TEST_TIMEOUT ?= 40m
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run assets learn learn-cpu test test-short bench lint deps deps-system deps-npm clean

all: build

build:
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do \
	  if [ -d cmd/$$b ]; then $(GO) build -o $(BIN)/$$b ./cmd/$$b || exit 1; fi; \
	done

# deps installs what the tests and the demo use besides Go modules: kcat (an
# independent Kafka client), promtool (validates the monitoring rules) and the
# npm packages that serve as Hugging Face reference oracles. Idempotent and quick
# when everything is there; without root it says what is missing and the tests
# that need it skip with that message.
deps: deps-system deps-npm

deps-system:
	@bash deploy/scripts/install-deps.sh

deps-npm:
	@for d in $$(find . -name package-lock.json -not -path '*/node_modules/*' -exec dirname {} \;); do \
	  if [ ! -d $$d/node_modules ]; then echo "npm ci in $$d"; (cd $$d && npm ci --no-audit --no-fund --loglevel=error) || exit 1; fi; \
	done

# assets resolves (or downloads into the cache) the τ² data and the tokenizer.
assets: build
	@$(BIN)/tau2-assets >/dev/null

run: deps build assets
	@$(BIN)/tau2-run bin=$(BIN) $(RUN_ARGS)

# learn is the learning experiment on one GPU (docs/LEARNING.md): demonstrations → SFT → GRPO with
# tau2-sampler and the CUDA trainer → pass^k before/after → report and figures in run/<time>/.
# learn-cpu runs every stage at a tiny scale on the pure-Go backend with the scripted stand-in.
learn: deps build gpu-trainer gpu-sampler
	@$(BIN)/tau2-run experiment bin=$(BIN) policy=sampler backend=cuda $(LEARN_ARGS)

learn-cpu: deps build
	@$(BIN)/tau2-run experiment bin=$(BIN) policy=scripted backend=cpu domain=mock split=base \
	    model_config=deploy/models/qwen3-tiny/config.json tasks=2 demo_trials=2 sft_max_steps=1 \
	    grpo_steps=1 group_size=2 batch_size=1 eval_trials=2 $(LEARN_ARGS)

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

test-short:
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
