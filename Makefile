# Oikos — build, test and run. Every target works on a fresh machine with Go, Node and the
# PostgreSQL 15 server binaries on PATH; nothing else has to be running.

GO        ?= go
MODULES   := shared testkit migrations seeds api scheduler agent deploy e2e
PKGS      := $(foreach m,$(MODULES),./$(m)/...)
FUZZTIME  ?= 10s
BIN       := bin

.PHONY: all build web api-client test fuzz bench up vet fmt tidy clean

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

# The whole suite with -race against a private PostgreSQL started for the run, then every
# fuzz target for FUZZTIME each.
test: build
	./scripts/test-deps.sh
	./$(BIN)/oikos-local test -- $(GO) test -race -count=1 -timeout 40m $(PKGS)
	./scripts/fuzz.sh $(FUZZTIME)

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# Benchmarks named in the issues; figures go to docs/benchmarks.md.
bench: build
	./$(BIN)/oikos-local test -- $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(PKGS)
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
