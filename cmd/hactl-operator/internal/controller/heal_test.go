package controller

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hactl/hactl/cmd/hactl-operator/internal/testenv"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// sshServer accepts TCP connections on 127.0.0.2 (the members are on 127.0.0.1) and runs the SSH handshake with a host key of its
// own, then drops the connection: enough for a client to be refused the key.
func sshServer(t *testing.T) (port int32) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _, _, _ = ssh.NewServerConn(c, cfg)
			}()
		}
	}()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

func authorizedKey(t *testing.T) (line string, privPEM []byte) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))), pem.EncodeToMemory(block)
}

// TestHealRefusedHostKey runs the reconciler with spec.healing (autoReplace, gracePeriod 3 s)
// against a real 3-member etcd: m2 killed and started again inside the grace period cancels the
// heal (condition MemberRecovered); killed for good, a heal starts once the grace period is over,
// the spare answers with a host key that is not the pinned one, and the heal is recorded as failed
// and rolled back before anything changed: m2 is still a member, spec.members unchanged, the
// Healing condition and a HealFailed event say why. With m1 killed too the quorum is lost: the
// condition says so with the restore command, and nothing is started.
func TestHealRefusedHostKey(t *testing.T) {
	f := newFixture(t)
	c := f.c
	ctx := context.Background()
	version := ""
	for _, ep := range mustStatus(t, f.etcd).Endpoints {
		version = ep.Version
	}
	bin := filepath.Join(t.TempDir(), "etcd")
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'etcd Version: "+version+"'\necho 'Git SHA: test'\n"), 0o755))
	pinned, _ := authorizedKey(t)
	_, keyPEM := authorizedKey(t)
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh", Namespace: "default"}, Data: map[string][]byte{SecretSSHKey: keyPEM}}))
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "spare-certs", Namespace: "default"},
		Data: map[string][]byte{"ca.crt": f.secret[SecretCA], "server.crt": []byte("x"), "server.key": []byte("x"), "peer.crt": []byte("x"), "peer.key": []byte("x")}}))

	e := f.cluster("healing", f.id, "etcd-client")
	e.Spec.Healing = &hactlv1.HealingSpec{AutoReplace: true, GracePeriod: &metav1.Duration{Duration: 3 * time.Second}, SSHKeySecret: &hactlv1.SecretRef{Name: "ssh"},
		Spares: []hactlv1.SpareHost{{Name: "spare-a", Address: "127.0.0.2", SSHPort: sshServer(t), HostKeys: []string{pinned}, CertificatesSecret: hactlv1.SecretRef{Name: "spare-certs"}}},
		Member: &hactlv1.MemberTemplate{Version: "v" + version, DataDir: "/var/lib/etcd", ClientPort: 42379, PeerPort: 42380,
			HeartbeatInterval: metav1.Duration{Duration: 100 * time.Millisecond}, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", InitialClusterToken: "t"}}
	must(t, c.Create(ctx, e))
	f.start(t, func(mgr ctrl.Manager) error {
		return (&EtcdClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("hactl-operator"), EtcdBinary: bin,
			RequeuePeriod: time.Second, DialTimeout: time.Second, RequestTimeout: 2 * time.Second}).SetupWithManager(mgr)
	})
	waitFor(t, c, "healing", "Running, nothing lost", func(s hactlv1.EtcdClusterStatus) bool {
		h := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionHealing)
		return s.Phase == hactlv1.PhaseRunning && h != nil && h.Reason == observe.ReasonAllMembersServe
	})

	// Back inside the grace period: no heal.
	f.etcd.Kill(2)
	waitFor(t, c, "healing", "waiting out the grace period", func(s hactlv1.EtcdClusterStatus) bool {
		h := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionHealing)
		return h != nil && h.Reason == observe.ReasonGracePeriod && s.Members[2].UnhealthySince != nil
	})
	must(t, f.etcd.Restart(2))
	waitFor(t, c, "healing", "recovered, no heal", func(s hactlv1.EtcdClusterStatus) bool {
		h := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionHealing)
		return h != nil && (h.Reason == observe.ReasonMemberRecovered || h.Reason == observe.ReasonAllMembersServe) && s.Healing == nil && len(s.Heals) == 0
	})

	// Lost for good: the heal starts, the spare's host key is refused, nothing changes.
	f.etcd.Kill(2)
	got := waitFor(t, c, "healing", "a failed heal recorded", func(s hactlv1.EtcdClusterStatus) bool { return len(s.Heals) == 1 && s.Healing == nil })
	rec := got.Heals[0]
	if rec.Result != hactlv1.HealFailed || rec.Member != "m2" || rec.Spare != "spare-a" || !strings.Contains(rec.Message, "not pinned in spec.healing.spares") || !strings.Contains(rec.Message, "step Planned") || strings.Contains(rec.Message, "rolling back") {
		t.Errorf("heal record %+v", rec)
	}
	h := meta.FindStatusCondition(got.Conditions, hactlv1.ConditionHealing)
	if h == nil || h.Status != metav1.ConditionFalse || !strings.Contains(h.Message, "failed") {
		t.Errorf("Healing condition %+v", h)
	}
	ml, err := f.etcd.ClientTo(t, f.etcd.Endpoints()[0]).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 3 {
		t.Errorf("%d members after a heal refused at the preflight, want 3 (nothing removed)", len(ml.Members))
	}
	var cur hactlv1.EtcdCluster
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "healing"}, &cur))
	if len(cur.Spec.Members) != 3 || cur.Spec.Members[2].Name != "m2" || len(cur.Spec.Healing.Spares) != 1 {
		t.Errorf("spec changed by a failed heal: %+v", cur.Spec)
	}
	// Not retried before HealRetryAfter.
	time.Sleep(3 * time.Second)
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "healing"}, &cur))
	if len(cur.Status.Heals) != 1 || cur.Status.Healing != nil {
		t.Errorf("a second heal within HealRetryAfter: %+v %+v", cur.Status.Heals, cur.Status.Healing)
	}
	// The quorum lost too: nothing destructive, the condition gives the restore command.
	f.etcd.Kill(1)
	got = waitFor(t, c, "healing", "reporting the lost quorum", func(s hactlv1.EtcdClusterStatus) bool {
		h := meta.FindStatusCondition(s.Conditions, hactlv1.ConditionHealing)
		return h != nil && h.Reason == observe.ReasonHealQuorumLost
	})
	if h := meta.FindStatusCondition(got.Conditions, hactlv1.ConditionHealing); !strings.Contains(h.Message, "hactl restore -f cluster.yaml --from latest") || got.Healing != nil || len(got.Heals) != 1 {
		t.Errorf("quorum lost: condition %+v, healing %+v, %d heal records", h, got.Healing, len(got.Heals))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var evs eventsv1.EventList
		must(t, c.List(ctx, &evs, client.InNamespace("default")))
		found := false
		for _, ev := range evs.Items {
			if ev.Reason == observe.ReasonHealFailed && ev.Regarding.Name == "healing" {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no HealFailed event")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The last free spare used by a heal: finishHeal's spec update (spare-a into spec.members in m2's
// place, the pool empty, autoReplace still on) is accepted by the CRD's rules, and the status gets
// the record and the condition. The lab's heal e2e found the update refused before the rule was a
// transition rule.
func TestFinishHealUsesUpThePool(t *testing.T) {
	_, c := testenv.Start(t)
	ctx := context.Background()
	pinned, _ := authorizedKey(t)
	e := &hactlv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "default"}, Spec: hactlv1.EtcdClusterSpec{
		ClusterID: "c1a55e7f00d1", ClientCertificateSecret: hactlv1.SecretRef{Name: "etcd-client"},
		Members: []hactlv1.MemberEndpoint{{Name: "m0", ClientURL: "https://10.0.0.1:2379"}, {Name: "m1", ClientURL: "https://10.0.0.2:2379"}, {Name: "m2", ClientURL: "https://10.0.0.3:2379", Zone: "az-c"}},
		Healing: &hactlv1.HealingSpec{AutoReplace: true, SSHKeySecret: &hactlv1.SecretRef{Name: "ssh"},
			Spares: []hactlv1.SpareHost{{Name: "spare-a", Address: "10.0.0.9", Zone: "az-c", HostKeys: []string{pinned}, CertificatesSecret: hactlv1.SecretRef{Name: "spare-certs"}}},
			Member: &hactlv1.MemberTemplate{Version: "v3.6.0", DataDir: "/var/lib/etcd", ClientPort: 2379, PeerPort: 2380,
				HeartbeatInterval: metav1.Duration{Duration: 100 * time.Millisecond}, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", InitialClusterToken: "t"}},
	}}
	must(t, c.Create(ctx, e))
	r := &EtcdClusterReconciler{Client: c}
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	hs := &hactlv1.HealingStatus{Member: "m2", MemberID: "3", Spare: "spare-a", NewMemberID: "9", Step: hactlv1.HealPromoting, StartedAt: started, StepAt: started}
	env := &healEnv{host: newLazyHost()}
	env.job.Spare = e.Spec.Healing.Spares[0]
	var err error
	if env.self, err = selfOf(e.Spec.Healing.Spares[0], e.Spec.Healing.Member); err != nil {
		t.Fatal(err)
	}
	if err := r.finishHeal(ctx, e, hs, env); err != nil {
		t.Fatalf("finishHeal: %v", err)
	}
	var cur hactlv1.EtcdCluster
	must(t, c.Get(ctx, client.ObjectKeyFromObject(e), &cur))
	if m := cur.Spec.Members[2]; m.Name != "spare-a" || m.ClientURL != "https://10.0.0.9:2379" || m.Zone != "az-c" {
		t.Errorf("spec.members[2] = %+v, want spare-a in m2's place", m)
	}
	if !cur.Spec.Healing.AutoReplace || len(cur.Spec.Healing.Spares) != 0 {
		t.Errorf("spec.healing after the heal: %+v", cur.Spec.Healing)
	}
	if len(cur.Status.Heals) != 1 || cur.Status.Heals[0].Result != hactlv1.HealSucceeded || cur.Status.Healing != nil {
		t.Errorf("status after the heal: heals %+v, healing %+v", cur.Status.Heals, cur.Status.Healing)
	}
	if h := meta.FindStatusCondition(cur.Status.Conditions, hactlv1.ConditionHealing); h == nil || h.Reason != observe.ReasonHealSucceeded || !strings.Contains(h.Message, "move spare-a into the etcd hosts of cluster.yaml in place of m2") {
		t.Errorf("Healing condition %+v", h)
	}
	// A retry of the finished heal (its status write lost) changes nothing more.
	if err := r.finishHeal(ctx, &cur, hs, env); err != nil {
		t.Fatalf("finishHeal again: %v", err)
	}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(e), &cur))
	if len(cur.Spec.Members) != 3 || cur.Spec.Members[2].Name != "spare-a" {
		t.Errorf("spec.members after a retry: %+v", cur.Spec.Members)
	}
}

// After a heal, while every member serves, the Healing condition keeps the heal's outcome (what
// cluster.yaml must now say); a later grace period replaces it.
func TestPlanHealKeepsTheLastHealsOutcome(t *testing.T) {
	now := time.Now()
	ec := &hactlv1.EtcdCluster{Spec: hactlv1.EtcdClusterSpec{Healing: &hactlv1.HealingSpec{AutoReplace: true}}}
	ec.Generation = 2
	st := &hactlv1.EtcdClusterStatus{Members: []hactlv1.MemberStatus{{Name: "m0", Healthy: true}, {Name: "m1", Healthy: true}, {Name: "spare-a", Healthy: true}}}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hactlv1.ConditionHealing, Status: metav1.ConditionFalse, Reason: observe.ReasonHealSucceeded,
		Message: "m2 (ID 3) replaced by spare-a: move spare-a into the etcd hosts of cluster.yaml in place of m2"})
	planHeal(ec, st, observe.Look{}, now)
	if h := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionHealing); h.Reason != observe.ReasonHealSucceeded || !strings.Contains(h.Message, "move spare-a") {
		t.Errorf("all members healthy after a heal: condition %+v, want the heal's outcome kept", h)
	}
	st.Members[1].Healthy, st.Members[1].UnhealthySince = false, &metav1.Time{Time: now.Add(-time.Second)}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hactlv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumHealthy"})
	planHeal(ec, st, observe.Look{Status: &etcd.ClusterStatus{}}, now)
	if h := meta.FindStatusCondition(st.Conditions, hactlv1.ConditionHealing); h.Reason == observe.ReasonHealSucceeded {
		t.Errorf("a member lost after the heal: condition %+v, want the new state", h)
	}
}
