package bootstrap

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRestoreScripts: the commands a restore runs on a member move the data dir aside (never
// delete it), restore under the member's own name and peer URL with the full initial cluster, the
// new token and the revision bump, and parse as POSIX sh; the rollback puts the old data dir back.
func TestRestoreScripts(t *testing.T) {
	f := newPlanFixture(t, 3, false)
	b := f.b
	b.rs = &restoreRun{opt: RestoreOptions{BumpRevision: DefaultBumpRevision}, stamp: "20261201T030000Z", token: "lab-new",
		remote: "/var/lib/hactl/restore-20261201T030000Z.db", aside: map[string]string{}}
	m := f.member("cp-b")
	b.rs.aside[m.Name] = "/var/lib/etcd.pre-restore-20261201T030000Z"
	script := b.restoreScript(m)
	for _, want := range []string{
		"mv /var/lib/etcd /var/lib/etcd.pre-restore-20261201T030000Z;",
		"snapshot restore /var/lib/hactl/restore-20261201T030000Z.db --name cp-b --data-dir /var/lib/etcd",
		"--initial-cluster " + b.foundingCluster() + " ",
		"--initial-cluster-token lab-new ",
		"--initial-advertise-peer-urls " + m.peerURL + " ",
		"--bump-revision 1000000000 --mark-compacted",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("restore script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "rm -rf") || strings.Contains(script, "rm -r ") {
		t.Errorf("a restore script deletes a directory:\n%s", script)
	}
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
}
