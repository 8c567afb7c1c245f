package runctx

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// shHost runs commands with the local /bin/sh and counts them.
type shHost struct {
	out  string
	mu   sync.Mutex
	cmds []string
	fail error
}

func (h *shHost) Run(ctx context.Context, step, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.mu.Lock()
	h.cmds = append(h.cmds, command)
	h.mu.Unlock()
	if h.fail != nil {
		return provision.Result{}, h.fail
	}
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).Output()
	return provision.Result{Stdout: out}, err
}
func (h *shHost) Upload(context.Context, string, []provision.File) error { return nil }
func (h *shHost) Commands() int                                          { h.mu.Lock(); defer h.mu.Unlock(); return len(h.cmds) }
func (h *shHost) Close() error                                           { return nil }

func testSpec() *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = "lab"
	c.Spec.Hosts = []v1alpha1.Host{
		{Name: "cp-a", Address: "10.0.0.1", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "lb-a", Address: "10.0.0.21", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
	}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	return c
}

// TestConnectOneCommandPerHost: two groups' needs of the same host are gathered with one command
// holding both probes; then runs for every host, its errors and the hosts' are aggregated per host.
func TestConnectOneCommandPerHost(t *testing.T) {
	spec := testSpec()
	var log bytes.Buffer
	p := ui.New(&bytes.Buffer{}, false, false)
	p.SetLog(&log)
	r := New(spec, p, false, provision.SpecOptions{})
	cp, lb := &shHost{}, &shHost{fail: errors.New("boom")}
	r.SetClient("cp-a", cp)
	r.SetClient("lb-a", lb)
	r.Need(spec.Spec.Hosts[0], provision.FactsRequest{Probes: []provision.Probe{{Name: "etcd", Script: "fact etcd.x 1"}}})
	r.Need(spec.Spec.Hosts[0], provision.FactsRequest{Probes: []provision.Probe{{Name: "front", Script: "fact front.y 2"}}})
	r.Need(spec.Spec.Hosts[1], provision.FactsRequest{})
	var then []string
	var mu sync.Mutex
	err := r.Connect(context.Background(), func(_ context.Context, host string) error {
		mu.Lock()
		defer mu.Unlock()
		then = append(then, host)
		return nil
	})
	var he *provision.HostError
	if !errors.As(err, &he) || he.Host != "lb-a" || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want lb-a's error only", err)
	}
	if cp.Commands() != 1 || r.Commands("cp-a") != 1 {
		t.Errorf("cp-a ran %d commands, want one facts command", cp.Commands())
	}
	f := r.Facts("cp-a")
	if f == nil || f.Value("etcd.x") != "1" || f.Value("front.y") != "2" {
		t.Fatalf("cp-a facts %+v", f)
	}
	if len(then) != 1 || then[0] != "cp-a" {
		t.Errorf("then ran for %v, want cp-a only (lb-a failed)", then)
	}
	// Known facts are not gathered again.
	if err := r.Connect(context.Background(), nil); err == nil || cp.Commands() != 1 {
		t.Errorf("second Connect: err %v, cp-a commands %d", err, cp.Commands())
	}
	if _, err := r.Exec(context.Background(), "cp-a", "test/step", "echo hi"); err != nil || !strings.Contains(log.String(), "cp-a: [test/step] echo hi") {
		t.Errorf("Exec: %v; log %q", err, log.String())
	}
	if _, err := r.Exec(context.Background(), "nope", "test/step", "true"); err == nil || !strings.Contains(err.Error(), "host nope") {
		t.Errorf("Exec on an unknown host: %v", err)
	}
	if r.EtcdDial() != nil {
		t.Error("EtcdDial without a bastion routes through SSH")
	}
}

// cannedHost answers every command with out.
type cannedHost struct{ shHost }

func (h *cannedHost) Run(_ context.Context, _, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, command)
	return provision.Result{Stdout: []byte(h.out)}, nil
}

// TestConnectForeignOverrides: a drop-in hactl does not own refuses the host (naming host, file and
// setting) in a run, is a warning in a dry run and with AllowForeignOverrides; hactl's own drop-in
// is no override.
func TestConnectForeignOverrides(t *testing.T) {
	const foreign = "/etc/systemd/system/etcd.service.d/override.conf"
	out := "uf.frag=etcd.service /etc/systemd/system/etcd.service\n" +
		"uf.dropin=etcd.service " + foreign + "\n" +
		"uf.file=" + base64.StdEncoding.EncodeToString([]byte("[Service]\nEnvironment=ETCD_QUOTA_BACKEND_BYTES=1\n")) + " " + foreign + "\n" +
		"uf.dropin=etcd.service /etc/systemd/system/etcd.service.d/10-ours.conf\n" +
		"uf.file=" + base64.StdEncoding.EncodeToString([]byte("[Service]\nNice=1\n")) + " /etc/systemd/system/etcd.service.d/10-ours.conf\n" +
		"end=ok\n"
	for _, c := range []struct {
		name          string
		dryRun, allow bool
		wantErr       bool
		warn          string
	}{
		{"run", false, false, true, ""},
		{"dry run", true, false, false, "it overrides what hactl renders; bootstrap refuses this host until the file is removed (or --allow-foreign-overrides)"},
		{"allowed", false, true, false, "kept (--allow-foreign-overrides)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := testSpec()
			var shown bytes.Buffer
			r := New(spec, ui.New(&shown, false, false), c.dryRun, provision.SpecOptions{})
			r.AllowForeignOverrides, r.OverridesFlag = c.allow, "--allow-foreign-overrides"
			h := &cannedHost{}
			h.out = out
			r.SetClient("cp-a", h)
			r.Manage(spec.Spec.Hosts[0], provision.OwnedUnitFiles{Unit: "etcd.service", Fragment: "/etc/systemd/system/etcd.service",
				DropIns: []string{"/etc/systemd/system/etcd.service.d/10-ours.conf"}})
			err := r.Connect(context.Background(), nil)
			if !strings.Contains(h.cmds[0], "-p DropInPaths") {
				t.Errorf("the facts command does not look for drop-ins:\n%s", h.cmds[0])
			}
			var fe *provision.ForeignOverridesError
			if got := errors.As(err, &fe); got != c.wantErr {
				t.Fatalf("err %v, want a ForeignOverridesError: %v", err, c.wantErr)
			}
			if c.wantErr && (!strings.Contains(err.Error(), "host cp-a:") || !strings.Contains(err.Error(), foreign+" sets Environment=ETCD_QUOTA_BACKEND_BYTES=1")) {
				t.Errorf("error does not name host, file and setting:\n%v", err)
			}
			if c.warn != "" && !strings.Contains(shown.String(), "cp-a: drop-in "+foreign+" sets Environment=ETCD_QUOTA_BACKEND_BYTES=1 for etcd.service: "+c.warn) {
				t.Errorf("output:\n%q", shown.String())
			}
			if got := r.ForeignOverrides("cp-a"); len(got) != 1 || got[0].Path != foreign {
				t.Errorf("ForeignOverrides = %v", got)
			}
		})
	}
}
