# hactl — the README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/hactl/hactl/cmd/hactl/app.version=$(VERSION)
LAB       := $(GO) run ./e2e/cmd/hactl-lab
E2E_TIMEOUT ?= 60m
export CGO_ENABLED ?= 1

.PHONY: build
build: ## build bin/hactl
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/hactl ./cmd/hactl

.PHONY: etcd-bins
etcd-bins: ## build the pinned etcd, etcdctl, etcdutl into bin/ (skipped when present)
	bash hack/build-etcd.sh

.PHONY: kubernetes-bins
kubernetes-bins: ## build the pinned kubeadm, kubelet, kube-apiserver, ... into bin/ (skipped when present)
	bash hack/build-kubernetes.sh

.PHONY: host-deps
host-deps: ## install docker.io + debootstrap and start dockerd when missing (fails loudly if impossible)
	bash hack/ensure-docker.sh

.PHONY: lab-image
lab-image: host-deps ## build the lab host image (cached by package-list hash)
	$(LAB) image

.PHONY: vet
vet:
	$(GO) vet ./...

.PHONY: unit
unit: host-deps kubernetes-bins ## unit tests (no lab; the real haproxy, keepalived and kubeadm validate rendered configs)
	HACTL_REQUIRE_KUBEADM=1 $(GO) test -race -count=1 ./...

.PHONY: e2e
e2e: host-deps etcd-bins build lab-image ## e2e tests: the real hactl against the lab (one lab per package)
	HACTL_BIN=$(CURDIR)/bin/hactl $(GO) test -tags e2e -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/...

.PHONY: test
test: vet unit e2e ## everything CI runs: vet, unit tests, e2e suite (installs what a fresh machine lacks)

.PHONY: demo
demo: host-deps etcd-bins build lab-image ## lab up (3 hosts in 3 zones), bootstrap, status; leaves the lab running
	$(LAB) up --members 3
	bin/hactl bootstrap -f .lab/cluster-3.yaml
	bin/hactl status -f .lab/cluster-3.yaml
	@echo
	@echo "The lab is running: 3 etcd members (cp-a, cp-b, cp-c) in zones az-a, az-b, az-c."
	@echo "Try next:"
	@echo "  bin/hactl bootstrap -f .lab/cluster-3.yaml      # a re-run: every member 'unchanged', nothing restarted"
	@echo "  bin/hactl status -f .lab/cluster-3.yaml -o json"
	@echo "  docker kill hactl-lab-cp-b; bin/hactl status -f .lab/cluster-3.yaml   # quorum holds with 2 of 3"
	@echo "  docker start hactl-lab-cp-b"
	@echo "  ETCDCTL='bin/etcdctl --endpoints https://172.28.0.11:2379 --cacert .lab/state-3/pki/ca.crt --cert .lab/state-3/pki/hactl-etcd-client.crt --key .lab/state-3/pki/hactl-etcd-client.key'; \$$ETCDCTL member list -w table"
	@echo "Remove the lab with: make lab-down"

.PHONY: lab-up
lab-up: host-deps etcd-bins lab-image
	$(LAB) up --members 5

.PHONY: lab-down
lab-down: ## remove every lab container, network and volume (hactl-lab*)
	$(LAB) down

.PHONY: bench
bench: host-deps etcd-bins build lab-image ## bootstrap benchmark in the lab (not part of CI): prints figures
	$(GO) run ./bench/bootstrap -hactl $(CURDIR)/bin/hactl

.PHONY: clean
clean:
	rm -rf bin/hactl .e2e.log

.PHONY: help
help:
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
