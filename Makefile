# The project's canonical commands. `make help` lists them.
GO ?= go

.PHONY: help run test race vet fmt lint fuzz bench

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

run: ## run Interlock with the example flows on an embedded NATS server
	$(GO) run ./cmd/interlock serve

test: ## run every test, with the race detector (what CI runs)
	$(GO) test -race ./...

race: test ## same as test

vet: ## go vet and gofmt
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

lint: vet ## golangci-lint (staticcheck included)
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...

fuzz: ## fuzz the decoders for 30 s each
	$(GO) test ./events -run '^$$' -fuzz FuzzDecodeEvent -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseResume -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseSelected -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzRedactTokens -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseToolRequest -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseExpire -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseRemind -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzParseAssign -fuzztime 30s
	$(GO) test ./events -run '^$$' -fuzz FuzzDecodeAuditKeys -fuzztime 30s
	$(GO) test ./protocol -run '^$$' -fuzz FuzzArgs -fuzztime 30s
	$(GO) test ./gate -run '^$$' -fuzz FuzzParse -fuzztime 30s

bench: ## throughput and latency against the raw JetStream floor
	$(GO) run ./bench --runs 2000 --concurrency 1
	$(GO) run ./bench --runs 2000 --concurrency 32
