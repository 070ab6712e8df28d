# agentry — the commands people expect. `make help` lists them.
SHELL := /bin/bash
GO ?= go
GOTESTFLAGS ?=
export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/agentry?sslmode=disable
export REDIS_URL ?= redis://127.0.0.1:6379/0

.PHONY: help run serve worker test test-race generate verify lint bench bench-micro web web-dev web-test build migrate services services-down

# The web app (web/): its dependencies come from the committed lockfile (npm ci), and its build
# (web/dist/app, embedded by the binary) is redone when a source, the lockfile or the GraphQL
# schema changed. No npm package may download a browser: the tests drive Debian's Chromium.
NPM ?= npm
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
WEB_DEPS := web/node_modules/.package-lock.json
WEB_BUILD := web/dist/app/index.html
WEB_SRC := $(shell find web/src -type f 2>/dev/null) web/index.html web/vite.config.ts web/tsconfig.json web/package.json $(wildcard graph/schema/*.graphqls)

$(WEB_DEPS): web/package.json web/package-lock.json
	cd web && $(NPM) ci --no-audit --no-fund
	@touch $@

$(WEB_BUILD): $(WEB_DEPS) $(WEB_SRC)
	cd web && $(NPM) run build
	@touch $@

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

services: ## start local Postgres and Redis under .data/ unless some already answer
	@deploy/local/services.sh up

services-down: ## stop the services `make services` started
	@deploy/local/services.sh down

run: services $(WEB_BUILD) ## start local services if needed, build the web app if stale, migrate, run `agentry dev` (API + workers)
	$(GO) run ./cmd/agentry dev

serve: services migrate $(WEB_BUILD) ## the API alone (`agentry serve` on :8080; health and metrics on :9091); run `make worker` beside it
	$(GO) run ./cmd/agentry serve

worker: services migrate ## the workers alone (`agentry worker`; health and metrics on :9090), beside `make serve`
	$(GO) run ./cmd/agentry worker

build: $(WEB_BUILD) ## build bin/agentry (with the web app)
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/agentry ./cmd/agentry

migrate: ## apply migrations to DATABASE_URL
	$(GO) run ./cmd/agentry migrate

test: services $(WEB_BUILD) ## run the whole test suite (web app's unit tests, Go tests, browser tests) against local Postgres and Redis
	cd web && $(NPM) test
	$(GO) test -count=1 -timeout 15m $(GOTESTFLAGS) ./...

test-race: services $(WEB_BUILD) ## the suite with the race detector
	$(GO) test -count=1 -race -timeout 20m $(GOTESTFLAGS) ./...

generate: $(WEB_DEPS) ## regenerate sqlc queries, gqlgen code, schema.graphql and the web app's typed GraphQL documents
	$(GO) tool sqlc generate
	$(GO) tool gqlgen generate
	$(GO) run ./graph/printschema > schema.graphql
	cd web && $(NPM) run --silent codegen

verify: generate ## fail when generated code is stale, go.mod untidy, the linters or the web app's type check complain
	@git diff --exit-code --stat -- internal/db/dbsqlc graph schema.graphql web/src/gql || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- internal/db/dbsqlc graph schema.graphql web/src/gql)" || { git status --porcelain -- internal/db/dbsqlc graph schema.graphql web/src/gql; echo "generated files are not committed"; exit 1; }
	cd web && $(NPM) run --silent typecheck
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy and commit"; exit 1; }
	@$(MAKE) --no-print-directory lint

# golangci-lint's version is pinned in tools/go.mod (its own module, so its dependencies stay out
# of go.mod); `go tool` builds it on first use.
GOLANGCI_LINT = $(GO) tool -modfile=tools/go.mod golangci-lint

lint: ## gofmt, go vet and golangci-lint (.golangci.yaml: depguard, staticcheck, errcheck, ...)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt would change these files"; exit 1; }
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

bench: services ## agentry bench: overhead against baselines and the goals of docs/PERFORMANCE.md (BENCHFLAGS=--quick)
	$(GO) run ./cmd/agentry bench $(BENCHFLAGS)

bench-micro: services ## micro-benchmarks (go test -bench)
	$(GO) test -run '^$$' -bench . -benchmem ./...

web: $(WEB_BUILD) ## build the web app into web/dist/app (embedded by the binary) when it is missing or stale

web-dev: $(WEB_DEPS) ## Vite's dev server on :5173, /graphql proxied to a running `agentry dev` (AGENTRY_URL, default :8080)
	cd web && $(NPM) run dev

web-test: services $(WEB_BUILD) ## the web app's unit tests and browser tests only
	cd web && $(NPM) test
	$(GO) test -count=1 -run TestBrowser -v ./web/
