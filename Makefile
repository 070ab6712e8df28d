# agentry — the commands people expect. `make help` lists them.
SHELL := /bin/bash
GO ?= go
GOTESTFLAGS ?=
export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/agentry?sslmode=disable
export REDIS_URL ?= redis://127.0.0.1:6379/0

.PHONY: help run serve worker test test-race generate verify lint bench bench-micro web build migrate services services-down

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

services: ## start local Postgres and Redis under .data/ unless some already answer
	@deploy/local/services.sh up

services-down: ## stop the services `make services` started
	@deploy/local/services.sh down

run: services ## start local services if needed, migrate, run `agentry dev` (API + workers)
	$(GO) run ./cmd/agentry dev

serve: services migrate ## the API alone (`agentry serve` on :8080; health and metrics on :9091); run `make worker` beside it
	$(GO) run ./cmd/agentry serve

worker: services migrate ## the workers alone (`agentry worker`; health and metrics on :9090), beside `make serve`
	$(GO) run ./cmd/agentry worker

build: ## build bin/agentry
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/agentry ./cmd/agentry

migrate: ## apply migrations to DATABASE_URL
	$(GO) run ./cmd/agentry migrate

test: services ## run the whole test suite against local Postgres and Redis
	$(GO) test -count=1 -timeout 15m $(GOTESTFLAGS) ./...

test-race: services ## the suite with the race detector
	$(GO) test -count=1 -race -timeout 20m $(GOTESTFLAGS) ./...

generate: ## regenerate sqlc queries, gqlgen code and schema.graphql
	$(GO) tool sqlc generate
	$(GO) tool gqlgen generate
	$(GO) run ./graph/printschema > schema.graphql

verify: generate ## fail when generated code is stale, gofmt or go vet complain
	@git diff --exit-code --stat -- internal/db/dbsqlc graph schema.graphql || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- internal/db/dbsqlc graph schema.graphql)" || { git status --porcelain -- internal/db/dbsqlc graph schema.graphql; echo "generated files are not committed"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt would change these files"; exit 1; }
	$(GO) vet ./...

lint: ## gofmt, go vet, and golangci-lint when installed
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@if command -v golangci-lint >/dev/null; then golangci-lint run ./...; else echo "golangci-lint not installed; ran gofmt and go vet only"; fi

bench: services ## agentry bench: overhead against baselines and the goals of docs/PERFORMANCE.md (BENCHFLAGS=--quick)
	$(GO) run ./cmd/agentry bench $(BENCHFLAGS)

bench-micro: services ## micro-benchmarks (go test -bench)
	$(GO) test -run '^$$' -bench . -benchmem ./...

web: ## the web app's built assets live in web/dist (served by the binary)
	@echo "web/dist is served as is; the web app has no separate build step yet"
