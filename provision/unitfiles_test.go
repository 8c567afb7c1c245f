package provision_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

// TestUnitFilesScriptRuns: the facts command finds a drop-in in a unit's own directory (not loaded
// by systemd: no daemon-reload) and reads its content; another unit's and a shared directory's are
// not that unit's.
func TestUnitFilesScriptRuns(t *testing.T) {
	etc, lib := t.TempDir(), t.TempDir()
	defer provision.SetDropInDirs(etc, lib)()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	foreign := filepath.Join(etc, "hactl-test-etcd.service.d", "override.conf")
	write(foreign, "[Service]\n# a comment\nEnvironment=ETCD_QUOTA_BACKEND_BYTES=1\n")
	write(filepath.Join(lib, "hactl-test-etcd.service.d", "not-a-conf.txt"), "x")
	write(filepath.Join(etc, "hactl-test-other.service.d", "o.conf"), "[Service]\nNice=5\n")
	f := runFacts(t, provision.FactsRequest{UnitFiles: []string{"hactl-test-etcd"}})
	uf, ok := f.UnitFiles["hactl-test-etcd"]
	if !ok || !slices.Equal(uf.DropIns, []string{foreign}) {
		t.Fatalf("unit files %+v, want the one drop-in %s", f.UnitFiles, foreign)
	}
	got := provision.Overrides(provision.OwnedUnitFiles{Unit: "hactl-test-etcd"}, uf)
	if len(got) != 1 || got[0].String() != "drop-in "+foreign+" sets Environment=ETCD_QUOTA_BACKEND_BYTES=1 for hactl-test-etcd.service" {
		t.Errorf("overrides %v", got)
	}
	// Owned: the same file is no override.
	if got := provision.Overrides(provision.OwnedUnitFiles{Unit: "hactl-test-etcd.service", DropIns: []string{foreign}}, uf); len(got) != 0 {
		t.Errorf("owned drop-in reported: %v", got)
	}
}

// TestParseUnitFiles reads systemctl show's part of the output: the fragment, drop-ins (also
// reported twice), environment files with systemd's "-" prefix and their content.
func TestParseUnitFiles(t *testing.T) {
	b64 := func(s string) string { return provision.EncodeBase64(s) }
	out := strings.Join([]string{
		"uf.frag=kubelet.service /etc/systemd/system/kubelet.service",
		"uf.dropin=kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"uf.dropin=kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"uf.dropin=kubelet.service /usr/lib/systemd/system/service.d/10-timeout-abort.conf",
		"uf.dropin=kubelet.service /run/systemd/system/kubelet.service.d/50-mine.conf",
		"uf.env=kubelet.service /var/lib/kubelet/kubeadm-flags.env",
		"uf.env=kubelet.service -/etc/default/kubelet",
		"uf.file=" + b64("[Service]\nExecStart=\nExecStart=/usr/local/bin/kubelet \\\n  --v=4\n") + " /run/systemd/system/kubelet.service.d/50-mine.conf",
		"uf.file=" + b64("[Service]\nTimeoutStopFailureMode=abort\n") + " /usr/lib/systemd/system/service.d/10-timeout-abort.conf",
		"uf.file=" + b64("KUBELET_KUBEADM_ARGS=\"--node-ip=1.2.3.4\"\n") + " /var/lib/kubelet/kubeadm-flags.env",
		"uf.file=" + b64("# extra args\nexport KUBELET_EXTRA_ARGS=--max-pods=10\nEMPTY=\n") + " /etc/default/kubelet",
		"end=ok", ""}, "\n")
	r := provision.FactsRequest{UnitFiles: []string{"kubelet", "containerd"}}
	f, err := provision.ParseFacts(r, []byte(out), time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if uf := f.UnitFiles["containerd"]; uf.Fragment != "" || len(uf.DropIns) != 0 {
		t.Errorf("containerd: %+v, want nothing", uf)
	}
	own := provision.OwnedUnitFiles{Unit: "kubelet", Fragment: "/etc/systemd/system/kubelet.service",
		DropIns:  []string{"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"},
		EnvFiles: []string{"/var/lib/kubelet/kubeadm-flags.env"}}
	var got []string
	for _, o := range provision.Overrides(own, f.UnitFiles["kubelet"]) {
		got = append(got, o.String())
	}
	want := []string{
		"drop-in /run/systemd/system/kubelet.service.d/50-mine.conf sets ExecStart=; ExecStart=/usr/local/bin/kubelet --v=4 for kubelet.service",
		"environment file /etc/default/kubelet sets KUBELET_EXTRA_ARGS=--max-pods=10 for kubelet.service",
	}
	if !slices.Equal(got, want) {
		t.Errorf("overrides:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOverridesPackageDefaults: what a package's own environment file sets by default is no
// override; anything added there is.
func TestOverridesPackageDefaults(t *testing.T) {
	own := provision.OwnedUnitFiles{Unit: "keepalived", PackageDefaults: []string{`KEEPALIVED_OPTIONS="-D"`}}
	uf := provision.UnitFiles{EnvFiles: []string{"/etc/sysconfig/keepalived"},
		Content: map[string][]byte{"/etc/sysconfig/keepalived": []byte("# Options for keepalived.\nKEEPALIVED_OPTIONS=\"-D\"\n")}}
	if got := provision.Overrides(own, uf); len(got) != 0 {
		t.Errorf("the package's default reported: %v", got)
	}
	uf.Content["/etc/sysconfig/keepalived"] = []byte("KEEPALIVED_OPTIONS=\"-D --vrrp\"\n")
	if got := provision.Overrides(own, uf); len(got) != 1 || got[0].Settings[0] != `KEEPALIVED_OPTIONS="-D --vrrp"` {
		t.Errorf("a changed option not reported: %v", got)
	}
}

// TestOverridesUnitFile: another unit file than hactl's, and an edited copy of a package's unit.
func TestOverridesUnitFile(t *testing.T) {
	cases := []struct {
		own  provision.OwnedUnitFiles
		frag string
		want string
	}{
		{provision.OwnedUnitFiles{Unit: "etcd", Fragment: "/etc/systemd/system/etcd.service"}, "/etc/systemd/system/etcd.service", ""},
		{provision.OwnedUnitFiles{Unit: "etcd", Fragment: "/etc/systemd/system/etcd.service"}, "/run/systemd/system/etcd.service",
			"unit file /run/systemd/system/etcd.service is loaded for etcd.service instead of /etc/systemd/system/etcd.service, which hactl renders"},
		{provision.OwnedUnitFiles{Unit: "haproxy"}, "/lib/systemd/system/haproxy.service", ""},
		{provision.OwnedUnitFiles{Unit: "haproxy"}, "/etc/systemd/system/haproxy.service",
			"unit file /etc/systemd/system/haproxy.service replaces the package's haproxy.service (an edited copy)"},
		{provision.OwnedUnitFiles{Unit: "haproxy"}, "", ""},
	}
	for _, c := range cases {
		got := provision.Overrides(c.own, provision.UnitFiles{Fragment: c.frag})
		if s := ""; len(got) > 0 {
			s = got[0].String()
			if s != c.want || len(got) != 1 {
				t.Errorf("%s at %s: %v, want %q", c.own.Unit, c.frag, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s at %s: nothing, want %q", c.own.Unit, c.frag, c.want)
		}
	}
}

// TestForeignOverridesError names the host, every file and the two ways out.
func TestForeignOverridesError(t *testing.T) {
	err := &provision.ForeignOverridesError{Host: "cp-a", Flag: "--allow-foreign-overrides", Overrides: []provision.Override{{Unit: "etcd.service", Kind: provision.OverrideDropIn,
		Path: "/etc/systemd/system/etcd.service.d/q.conf", Settings: []string{"Environment=ETCD_QUOTA_BACKEND_BYTES=1"}}}}
	want := "host cp-a: 1 file(s) hactl does not own override what it renders:\n" +
		"\t  drop-in /etc/systemd/system/etcd.service.d/q.conf sets Environment=ETCD_QUOTA_BACKEND_BYTES=1 for etcd.service\n" +
		"\t  the spec is the one source of these settings: remove the file(s) on cp-a (then systemctl daemon-reload), or pass --allow-foreign-overrides to keep them"
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
	// A command without the flag (restore, member replace) names only the removal.
	err.Flag = ""
	if want := strings.TrimSuffix(want, ", or pass --allow-foreign-overrides to keep them"); err.Error() != want {
		t.Errorf("without a flag: got\n%s\nwant\n%s", err, want)
	}
}

// journalRunner answers the journal command with out (or fails with jerr) and records commands.
type journalRunner struct {
	out  string
	jerr error
	cmds []string
}

func (r *journalRunner) Run(_ context.Context, _, command string, _ ...provision.RunOption) (provision.Result, error) {
	r.cmds = append(r.cmds, command)
	if r.jerr != nil {
		return provision.Result{}, r.jerr
	}
	return provision.Result{Stdout: []byte(r.out)}, nil
}

// TestExplainUnitFailure: a failed start carries the unit's journal lines and still unwraps to the
// command's error; no journal, an interrupted run or no error leave err as it was.
func TestExplainUnitFailure(t *testing.T) {
	startErr := errors.New(`systemctl start etcd.service: Job for etcd.service failed. See "journalctl -xeu etcd.service" for details.`)
	r := &journalRunner{out: "etcd: flag provided but not defined: -bogus\nusage ...\n"}
	err := provision.ExplainUnitFailure(context.Background(), r, "etcd/start", startErr, "etcd")
	var uf *provision.UnitFailedError
	if !errors.As(err, &uf) || !errors.Is(err, startErr) || uf.Unit != "etcd.service" {
		t.Fatalf("err %v, want a *UnitFailedError wrapping the start error", err)
	}
	if !strings.Contains(err.Error(), "etcd.service's last 2 journal lines (journalctl -u etcd.service -n 20 --no-pager -o cat):\n\t    etcd: flag provided but not defined: -bogus") {
		t.Errorf("message:\n%s", err)
	}
	if !slices.Equal(r.cmds, []string{"journalctl -u etcd.service -n 20 --no-pager -o cat"}) {
		t.Errorf("commands %q", r.cmds)
	}
	// Already explained: not read again.
	if again := provision.ExplainUnitFailure(context.Background(), r, "x", err, "etcd"); again != err || len(r.cmds) != 1 {
		t.Errorf("explained twice: %v", again)
	}
	for name, r := range map[string]*journalRunner{"no entries": {out: "-- No entries --\n"}, "journal fails": {jerr: errors.New("no journalctl")}} {
		if got := provision.ExplainUnitFailure(context.Background(), r, "etcd/start", startErr, "etcd"); got != startErr {
			t.Errorf("%s: %v, want the error unchanged", name, got)
		}
	}
	if provision.ExplainUnitFailure(context.Background(), r, "etcd/start", nil, "etcd") != nil {
		t.Error("nil error explained")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := provision.ExplainUnitFailure(ctx, r, "etcd/start", startErr, "etcd"); got != startErr {
		t.Errorf("interrupted run: %v", got)
	}
}
