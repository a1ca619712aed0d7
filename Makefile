# Oikos — build, test and run. Every target works on a fresh machine with Go, Node and the
# PostgreSQL 15 server binaries on PATH; nothing else has to be running.

SHELL     := /bin/bash
GO        ?= go
MODULES   := shared testkit migrations seeds api scheduler agent deploy e2e
PKGS      := $(foreach m,$(MODULES),./$(m)/...)
FUZZTIME  ?= 10s
BIN       := bin

.PHONY: all build web api-client lint tools test fuzz bench up vet fmt tidy clean

all: build

# The dashboard (api/web, Svelte + Vite) into api/web/dist, which oikos-api embeds.
web:
	./scripts/build-web.sh

# The Go client of the api (shared/apiclient/api.gen.go) from api/openapi.yaml.
api-client:
	./scripts/gen-api-client.sh

build: web
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/oikos-api ./api/cmd/oikos-api
	$(GO) build -o $(BIN)/oikos ./api/cmd/oikos
	$(GO) build -o $(BIN)/oikos-scheduler ./scheduler/cmd/oikos-scheduler
	$(GO) build -o $(BIN)/oikos-agent ./agent/cmd/oikos-agent
	$(GO) build -o $(BIN)/labsim ./testkit/cmd/labsim
	$(GO) build -o $(BIN)/llmsim ./testkit/cmd/llmsim
	$(GO) build -o $(BIN)/oikos-local ./deploy/cmd/oikos-local

# gofmt, go vet, staticcheck (pinned in scripts/tools.sh, installed into bin/tools/) and the
# import-layering rules (deploy/layering) over every module of go.work.
lint:
	./scripts/lint.sh

# The pinned developer tools (staticcheck) into bin/tools/; lint installs them itself.
tools:
	./scripts/tools.sh

# The whole Go suite with -race against a private PostgreSQL started for the run; then every
# fuzz target for FUZZTIME each, with lint and the dashboard's unit tests beside the fuzzing
# (scripts/test-beside.sh). They run beside the fuzzing, not the Go suite: a cold lint keeps
# both cores busy for minutes, and the suite's lease and scheduler tests must not share the
# machine with it. Any failure fails the target.
test: build
	./scripts/test-deps.sh
	./$(BIN)/oikos-local test -- $(GO) test -race -count=1 -timeout 40m $(PKGS)
	./scripts/test-beside.sh ./scripts/lint.sh ./scripts/test-web.sh -- ./scripts/fuzz.sh $(FUZZTIME)

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# Benchmarks named in the issues; figures go to docs/benchmarks.md.
# The Go benchmarks' output is kept in .local/bench.txt and written into the generated table
# of docs/benchmarks.md (deploy/cmd/benchdoc), so no figure in it is copied by hand.
bench: build
	@mkdir -p .local
	set -o pipefail; ./$(BIN)/oikos-local test -- $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(PKGS) | tee .local/bench.txt
	$(GO) run ./deploy/cmd/benchdoc -in .local/bench.txt -doc docs/benchmarks.md -command "go test -run '^$$' -bench . -benchmem -count=1 (every module)"
	OIKOS_BENCH=1 ./$(BIN)/oikos-local test -- $(GO) test -count=1 -run '^TestHTTPBenchmark$$' -v ./api/internal/httpapi/

# The whole system locally: private Postgres, lab simulator, api, scheduler, agent.
up: build
	./$(BIN)/oikos-local up

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -l -w $(MODULES)

tidy:
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy) || exit 1; done

clean:
	rm -rf $(BIN) api/web/dist/assets api/web/dist/index.html
