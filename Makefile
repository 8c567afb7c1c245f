# hactl — the README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time, not the build's: builds of one commit report the same date.
BUILD_DATE ?= $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null)
LDFLAGS   := -X github.com/hactl/hactl/cmd/hactl/app.version=$(VERSION) -X github.com/hactl/hactl/cmd/hactl/app.commit=$(COMMIT) -X github.com/hactl/hactl/cmd/hactl/app.buildDate=$(BUILD_DATE)
LAB       := $(GO) run ./e2e/cmd/hactl-lab
# Per e2e package (go test -timeout): the slowest, e2e/kube, takes about 21 minutes; a hang fails in 40.
E2E_TIMEOUT ?= 40m
export CGO_ENABLED ?= 1

.PHONY: build
build: ## build bin/hactl
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/hactl ./cmd/hactl

.PHONY: etcd-bins
etcd-bins: ## build the pinned etcd, etcdctl, etcdutl into bin/ and the v3.5 release the lab upgrades from into bin/etcd-v3.5/ (each cached by input hash)
	bash hack/build-etcd.sh tools/etcd bin
	bash hack/build-etcd.sh tools/etcd35 bin/etcd-v3.5

.PHONY: minio-bin
minio-bin: ## build the pinned MinIO server into bin/minio for the backup tests (skipped when present)
	bash hack/build-minio.sh

.PHONY: kubernetes-bins
kubernetes-bins: ## build the pinned kubeadm, kubelet, kube-apiserver, ... into bin/ (skipped when present)
	bash hack/build-kubernetes.sh

.PHONY: scheduler-bin
scheduler-bin: ## build hactl-scheduler (the scheduler/ module) into bin/hactl-scheduler (cached by input hash)
	bash hack/build-scheduler.sh

.PHONY: scheduler-image
scheduler-image: host-deps ## build hactl-scheduler's image FROM scratch into bin/hactl-scheduler-image.tar (cached by input hash; reference in bin/hactl-scheduler-image.ref)
	bash hack/build-scheduler.sh --image

.PHONY: controller-gen
controller-gen: ## build the pinned controller-gen (tools/controller-gen) into bin/controller-gen (cached by input hash)
	bash hack/build-controller-gen.sh

.PHONY: generate
generate: controller-gen ## regenerate the operator API's deepcopy methods and CRDs (operator/api/v1alpha1 → operator/crds)
	bin/controller-gen object paths=./operator/api/...
	bin/controller-gen crd paths=./operator/api/... output:crd:dir=operator/crds

.PHONY: operator-image
operator-image: host-deps etcd-bins ## build hactl-operator (cmd/hactl-operator) and its image FROM scratch, with the pinned etcd for the members it heals, into bin/hactl-operator-image.tar (cached by input hash)
	bash hack/build-operator.sh --image

.PHONY: promtool
promtool: ## install promtool (Debian's prometheus package; no daemon left running) for deploy/prometheus's rule tests (skipped when present)
	bash hack/ensure-promtool.sh

.PHONY: coredns-bin
coredns-bin: ## build the CoreDNS server kubeadm deploys into bin/coredns for the DNS add-on image (skipped when present)
	bash hack/build-coredns.sh

# kube-images copies kube-proxy's iptables and conntrack out of the lab's host image: lab-image first
# (the script would build a missing host image itself, but not twice in parallel with lab-image).
.PHONY: kube-images
kube-images: host-deps kubernetes-bins coredns-bin apt-repo lab-image ## build the control-plane, kube-proxy, coredns and pause images into bin/kube-images-<version>.tar and one archive per image in bin/kube-images-<version>/ (skipped when present)
	bash hack/build-kube-images.sh

.PHONY: host-deps
host-deps: ## install docker.io + debootstrap and start dockerd when missing (fails loudly if impossible)
	bash hack/ensure-docker.sh

.PHONY: apt-repo
apt-repo: host-deps ## build the mirror's apt repository of the Kubernetes node packages into bin/apt-<hash>/ (skipped when present; needs Debian's archive)
	$(GO) run ./e2e/cmd/apt-repo

# lab-image also builds the apt repository: the image lacks the Kubernetes node packages, which the
# lab's nodes install from the mirror (e2e, demo, bench and lab-up all depend on lab-image).
.PHONY: lab-image
lab-image: host-deps apt-repo ## build the lab host image (cached by package-list hash)
	$(LAB) image

.PHONY: kind-bins
kind-bins: ## build the pinned kind CLI, containerd 2 and crictl into bin/kind-<version>/ (cached by version)
	bash hack/build-kind.sh

.PHONY: kind-image
kind-image: host-deps kind-bins kubernetes-bins etcd-bins kube-images ## build the lab's kind node image offline (docs/kind.md; cached by input hash)
	$(LAB) kind-image

.PHONY: kind-up
kind-up: kind-image ## (re)create the kind cluster hactl-lab-kind on the lab network (1 control plane, 3 workers in az-a/b/c); kubeconfig .lab/kind.kubeconfig
	$(LAB) kind-up

.PHONY: kind-down
kind-down: ## delete the kind cluster (make lab-down removes it too)
	$(LAB) kind-down

.PHONY: vet
vet: cross ## go vet of every module and of the e2e suites (the test targets run go test -vet=off: vetted here once)
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	cd scheduler && GOWORK=off $(GO) vet ./...
	cd cmd/hactl-operator && GOWORK=off $(GO) vet ./...

# CROSS_PLATFORMS are the GOOS/GOARCH pairs `make cross` builds hactl for besides the host's.
CROSS_PLATFORMS := darwin/arm64 darwin/amd64 linux/arm64

.PHONY: cross
cross: ## build hactl for macOS (arm64, amd64) and linux/arm64 into a temp dir (removed after) and vet its commands on macOS: keeps the CLI portable
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for p in $(CROSS_PLATFORMS); do \
	  echo "cross: $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -o "$$tmp/hactl-$${p/\//-}" ./cmd/hactl; \
	done; \
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 $(GO) vet ./cmd/hactl/...

.PHONY: unit
unit: host-deps etcd-bins kubernetes-bins minio-bin scheduler-bin promtool controller-gen ## unit tests (no lab; the real haproxy, keepalived, kubeadm and hactl-scheduler validate rendered configs; a real MinIO for backups; promtool tests the alert rules); the scheduler/ and cmd/hactl-operator modules' own tests (the operator's against a real kube-apiserver through envtest)
	HACTL_REQUIRE_KUBEADM=1 HACTL_REQUIRE_MINIO=1 HACTL_REQUIRE_SCHEDULER=1 HACTL_REQUIRE_PROMTOOL=1 HACTL_REQUIRE_CONTROLLER_GEN=1 \
	  HACTL_REQUIRE_SYSTEMD_ANALYZE=1 HACTL_REQUIRE_WGET=1 HACTL_REQUIRE_BASH=1 $(GO) test -vet=off -race -count=1 ./...
	cd scheduler && GOWORK=off $(GO) test -vet=off -count=1 ./...
	cd cmd/hactl-operator && GOWORK=off $(GO) test -vet=off -count=1 ./...

.PHONY: e2e
e2e: host-deps etcd-bins kubernetes-bins kube-images minio-bin scheduler-image operator-image build lab-image kind-image ## e2e tests: the real hactl against the lab (one lab per package)
	HACTL_BIN=$(CURDIR)/bin/hactl $(GO) test -vet=off -tags e2e -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/...

.PHONY: release-tools
release-tools: ## build the pinned goreleaser and cyclonedx-gomod (tools/goreleaser, tools/cyclonedx-gomod) into bin/ (cached by input hash)
	bash hack/build-release-tools.sh

.PHONY: release-check
release-check: release-tools ## goreleaser check of .goreleaser.yaml (the only part of the release in make test)
	bin/goreleaser check

.PHONY: release
release: release-tools ## a snapshot release into dist/, offline: archives for linux/darwin x amd64/arm64, checksums.txt, .deb/.rpm, CycloneDX SBOMs (not part of make test)
	PATH="$(CURDIR)/bin:$$PATH" HACTL_COMMIT=$(COMMIT) HACTL_SHORT_COMMIT=$$(git rev-parse --short=12 HEAD) \
	  HACTL_COMMIT_DATE=$(BUILD_DATE) HACTL_COMMIT_TIMESTAMP=$$(git log -1 --format=%ct) \
	  bin/goreleaser release --snapshot --clean
	@ls -l dist/*.tar.gz dist/*.deb dist/*.rpm dist/checksums.txt dist/*.cdx.json

.PHONY: test
test: vet release-check unit e2e ## everything CI runs: vet, goreleaser check, unit tests, e2e suite (installs what a fresh machine lacks)

.PHONY: demo
demo: host-deps etcd-bins kubernetes-bins kube-images build lab-image ## lab up, one hactl bootstrap (etcd, LB, 3 control planes, 3 workers), status, kubectl via the VIP; leaves the lab running
	$(LAB) up --members 3 --workers
	bin/hactl bootstrap -f .lab/cluster-3.yaml
	bin/hactl status -f .lab/cluster-3.yaml
	bin/hactl kubeconfig -f .lab/cluster-3.yaml --out .lab/admin.conf
	bin/kubectl --kubeconfig .lab/admin.conf get nodes -o wide -L topology.kubernetes.io/zone
	@echo
	@echo "The lab is running: etcd + Kubernetes control planes on cp-a, cp-b, cp-c (zones az-a, az-b, az-c), workers"
	@echo "w-a, w-b, w-c, HAProxy + Keepalived on lb-a, lb-b holding the VIP 172.28.0.100 - all built by the one bootstrap."
	@echo "Try next:"
	@echo "  bin/kubectl --kubeconfig .lab/admin.conf get pods -A -o wide          # through the VIP (https://172.28.0.100:6443)"
	@echo "  bin/kubectl --kubeconfig .lab/admin.conf create deployment web --image registry.k8s.io/pause:3.10.2 --replicas 3"
	@echo "  bin/hactl bootstrap -f .lab/cluster-3.yaml      # a re-run: no kubeadm command, nothing restarted"
	@echo "  docker kill hactl-lab-cp-b; bin/hactl status -f .lab/cluster-3.yaml   # exit 3: cp-b unreachable at once, its Node NotReady after ~40-60 s"
	@echo "  docker start hactl-lab-cp-b                     # etcd back in ~8 s, the node Ready again within a minute"
	@echo "  docker exec hactl-lab-lb-a systemctl stop haproxy; sleep 6; bin/hactl status -f .lab/cluster-3.yaml   # the VIP moved to lb-b"
	@echo "  bin/hactl drill kill-leader -f .lab/cluster-3.yaml --yes   # kill the etcd leader: election, RTO; no acknowledged write lost"
	@echo "  bin/hactl reset -f .lab/cluster-3.yaml --hosts w-c --yes   # a worker out of the cluster (bootstrap joins it again)"
	@echo "Remove the lab with: make lab-down"

.PHONY: lab-up
lab-up: host-deps etcd-bins lab-image
	$(LAB) up --members 5

.PHONY: lab-down
lab-down: ## remove every lab container, network and volume (hactl-lab*)
	$(LAB) down

# BENCH_BEFORE=path/to/hactl runs the bootstrap benchmark with a second binary too (e.g. a build of the
# previous release) and prints both side by side.
.PHONY: bench
bench: host-deps etcd-bins kubernetes-bins kube-images minio-bin scheduler-image operator-image build lab-image kind-image ## benchmarks in the lab (not part of CI): bootstrap, VIP failover, backend ejection, backup/restore, failover drills, drill restore (RTO/RPO with deltas, readyz through the VIP), etcd member replace and defrag, scheduler throughput and Lease takeover, the operator's idle cost, takeover and snapshot slots, its heal of a lost member, kind (cold image, warm cluster, Lease takeovers in kind vs the lab's kubeadm cluster); prints figures
	$(GO) run ./bench/bootstrap -hactl $(CURDIR)/bin/hactl $(if $(BENCH_BEFORE),-before $(BENCH_BEFORE))
	$(GO) run ./bench/lb -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/backup -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/backup -hactl $(CURDIR)/bin/hactl -values k8s -sizes 256
	$(GO) run ./bench/drill -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/restore -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/etcd -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/scheduler -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/operator -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/heal -hactl $(CURDIR)/bin/hactl
	$(GO) run ./bench/kind -hactl $(CURDIR)/bin/hactl

.PHONY: clean
clean:
	rm -rf bin/hactl .e2e.log

.PHONY: help
help:
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
