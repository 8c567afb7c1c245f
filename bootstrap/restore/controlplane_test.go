package restore

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/phase"
)

// fakeCtr is a ctr for holdScript: containers id-api (kube-apiserver), id-cm
// (kube-controller-manager) and other (a workload) run until killed; kube-scheduler has no
// container. With $STUCK set a kill does nothing. Every call is appended to $LOG.
const fakeCtr = `#!/bin/sh
echo "ctr $*" >> "$LOG"
shift 2
case "$1 $2" in
"containers ls") case "$4" in *'=="kube-apiserver"'|*'==kube-apiserver') echo id-api;; *'==kube-controller-manager') echo id-cm;; esac;;
"tasks ls") echo "TASK PID STATUS"; for id in id-api id-cm other; do if [ -e "$DIR/killed-$id" ]; then echo "$id 1 STOPPED"; else echo "$id 1 RUNNING"; fi; done;;
"tasks kill") [ -n "${STUCK:-}" ] || touch "$DIR/killed-$5";;
esac
`

// runHold runs holdScriptWaiting(tenths) with sh here, fake systemctl and ctr first on PATH. It
// returns stdout, stderr, the calls' log and the exit error. With noUnit, the host has no kubelet unit.
func runHold(t *testing.T, tenths int, stuck, noUnit bool) (string, string, string, error) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	systemctl := "#!/bin/sh\necho \"systemctl $*\" >> \"$LOG\"\n"
	if noUnit {
		systemctl += "[ \"$1\" != cat ] || { echo 'No files found for kubelet.service.' >&2; exit 1; }\n"
	}
	for name, body := range map[string]string{"ctr": fakeCtr, "systemctl": systemctl} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command("/bin/sh", "-c", holdScriptWaiting(tenths))
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "LOG=" + log, "DIR=" + dir}
	if stuck {
		cmd.Env = append(cmd.Env, "STUCK=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	calls, _ := os.ReadFile(log)
	return stdout.String(), stderr.String(), string(calls), err
}

// TestHoldScript: restore/hold stops kubelet before anything else, kills the running tasks of
// kubeadm's control-plane containers only (not a workload's), waits for them and names them; a
// task that does not end is exit 1 naming it.
func TestHoldScript(t *testing.T) {
	out, stderr, calls, err := runHold(t, 20, false, false)
	if err != nil {
		t.Fatalf("hold: %v\n%s\ncalls:\n%s", err, stderr, calls)
	}
	if got := strings.Fields(out); strings.Join(got, " ") != "kube-apiserver kube-controller-manager" {
		t.Errorf("hold printed %q, want the killed containers kube-apiserver kube-controller-manager", out)
	}
	lines := strings.Split(strings.TrimSpace(calls), "\n")
	if lines[0] != "systemctl cat kubelet.service" || lines[1] != "systemctl stop kubelet" {
		t.Errorf("first call %q, want kubelet stopped before any container is killed:\n%s", lines[0], calls)
	}
	for _, want := range []string{"ctr -n k8s.io tasks kill -s SIGKILL id-api", "ctr -n k8s.io tasks kill -s SIGKILL id-cm"} {
		if !strings.Contains(calls, want) {
			t.Errorf("no %q:\n%s", want, calls)
		}
	}
	if strings.Contains(calls, "kill -s SIGKILL other") {
		t.Errorf("a workload's container was killed:\n%s", calls)
	}
	_, stderr, _, err = runHold(t, 3, true, false)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr, "still running after SIGKILL: id-api") {
		t.Errorf("a task that never ends: %v %q, want exit 1 naming id-api", err, stderr)
	}
	// No kubelet unit (control-plane hosts that only back the load balancer so far): nothing held.
	out, stderr, calls, err = runHold(t, 20, false, true)
	if err != nil || strings.TrimSpace(out) != noKubelet || strings.Contains(calls, "stop") || strings.Contains(calls, "ctr") {
		t.Errorf("no kubelet unit: %v %q %q, want %s and nothing stopped or killed:\n%s", err, out, stderr, noKubelet, calls)
	}
	if out, err := exec.Command("sh", "-n", "-c", holdScript()).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
}

// TestControlPlanePhases: with control-plane hosts in the spec, `hactl restore` holds them after
// restore/ship (nothing is stopped before the snapshot is on every member) and releases them after
// restore/verify; a seed (bootstrap --restore-from: a new cluster) holds nothing. The readyz
// command asks each host's own apiserver at its advertise address.
func TestControlPlanePhases(t *testing.T) {
	c := testSpec(t, true)
	r, _ := testGroupOf(t, c, false)
	l, err := r.RestorePhases()
	if err != nil {
		t.Fatal(err)
	}
	want := "preflight pki detect restore/plan restore/ship restore/hold restore/stop restore/data restore/start etcd/wait restore/verify restore/release"
	if got := strings.Join(phase.Titles(l), " "); got != want {
		t.Errorf("restore phases with control planes:\n got %s\nwant %s", got, want)
	}
	if len(r.cp.hosts) != 4 {
		t.Errorf("held hosts %v, want the 4 control planes", r.cp.hosts)
	}
	if err := r.releaseControlPlane(t.Context()); err != nil || r.cp.pending() {
		t.Errorf("release with nothing held: %v", err)
	}
	if seed, _ := testGroupOf(t, c, true); seed.cp != nil {
		t.Error("a seed (new cluster) holds control planes")
	}
	// Without spec.kubernetes (a kubeadm control plane of the user's own behind hactl's etcd and
	// VIP) the control planes are held too: holdScript leaves a host without kubelet alone.
	noKube := testSpec(t, true)
	noKube.Spec.Kubernetes = nil
	r, _ = testGroupOf(t, noKube, false)
	if l, _ := r.RestorePhases(); r.cp == nil || !slices.Contains(phase.Titles(l), PhaseHold) {
		t.Errorf("control planes not held without spec.kubernetes: %v", phase.Titles(l))
	}
	// The readyz command prints noReadyzCheck where kubectl is missing (sh here, an empty PATH).
	cmd := exec.Command("/bin/sh", "-c", readyzCommand(c, c.Spec.Hosts[0]))
	cmd.Env = []string{"PATH=" + t.TempDir()}
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != noReadyzCheck {
		t.Errorf("readyz without kubectl: %v %q, want %s", err, out, noReadyzCheck)
	}
	if got, want := readyzCommand(c, c.Spec.Hosts[3]), "--server 'https://[fd00::4]:6443' get --raw /readyz"; !strings.Contains(got, want) {
		t.Errorf("readyz command %q lacks %q", got, want)
	}
}
