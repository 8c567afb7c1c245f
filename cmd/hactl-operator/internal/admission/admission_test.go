// Package admission tests that the API server itself refuses bad EtcdCluster and EtcdSnapshot
// objects with the CRDs' schema and CEL rules (operator/crds), naming the field: the operator runs
// no webhook.
package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hactl/hactl/cmd/hactl-operator/internal/testenv"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

func valid(name string) *hactlv1.EtcdCluster {
	return &hactlv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: hactlv1.EtcdClusterSpec{
			ClusterID: "c1a55e7f00d1",
			Members: []hactlv1.MemberEndpoint{
				{Name: "cp-a", ClientURL: "https://10.0.0.11:2379"},
				{Name: "cp-b", ClientURL: "https://10.0.0.12:2379"},
				{Name: "cp-c", ClientURL: "https://[fd00::13]:2379"},
			},
			ClientCertificateSecret: hactlv1.SecretRef{Name: "etcd-client"},
			Backup: &hactlv1.BackupSpec{
				ObjectStore:       hactlv1.ObjectStore{Endpoint: "minio.example:9000", Bucket: "etcd-backups"},
				CredentialsSecret: hactlv1.SecretRef{Name: "s3"},
				Every:             &metav1.Duration{Duration: 5 * time.Minute},
				Retention:         &hactlv1.Retention{KeepLast: ptr.To[int32](24)},
			},
			Maintenance: &hactlv1.MaintenanceSpec{Window: &hactlv1.MaintenanceWindow{Start: "02:30", Duration: metav1.Duration{Duration: time.Hour}}},
			Healing: &hactlv1.HealingSpec{
				AutoReplace: true,
				Spares: []hactlv1.SpareHost{{Name: "spare-a", Address: "10.0.0.21", Zone: "az-a",
					HostKeys:           []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKk5pZOCa3Y0Rz6H5QKqJm8Y1YH7kV0m0lZt2q0j6nZ1"},
					CertificatesSecret: hactlv1.SecretRef{Name: "hactl-etcd-spare-a"}}},
				SSHKeySecret: &hactlv1.SecretRef{Name: "hactl-operator-ssh"},
				Member: &hactlv1.MemberTemplate{Version: "v3.6.16", DataDir: "/var/lib/etcd", ClientPort: 2379, PeerPort: 2380,
					HeartbeatInterval: metav1.Duration{Duration: 100 * time.Millisecond}, QuotaBackendBytes: 2 << 30,
					AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", InitialClusterToken: "lab3-1"},
			},
		},
	}
}

func TestAdmission(t *testing.T) {
	_, c := testenv.Start(t)
	ctx := context.Background()

	ok := valid("ok")
	if err := c.Create(ctx, ok); err != nil {
		t.Fatalf("a valid EtcdCluster is refused: %v", err)
	}
	// Defaults from the schema.
	if ok.Spec.ElectionTimeout == nil || ok.Spec.ElectionTimeout.Duration != time.Second || ok.Spec.Backup.Compression != "zstd" ||
		ok.Spec.Maintenance.DefragThresholdPercent != 50 || ok.Spec.Maintenance.RecoverNoSpace == nil || !*ok.Spec.Maintenance.RecoverNoSpace {
		t.Errorf("defaults not applied: %+v %+v %+v", ok.Spec.ElectionTimeout, ok.Spec.Backup, ok.Spec.Maintenance)
	}
	if h := ok.Spec.Healing; h.GracePeriod == nil || h.GracePeriod.Duration != 5*time.Minute || h.SSHUser != "root" || h.Spares[0].SSHPort != 22 {
		t.Errorf("healing defaults not applied: %+v", h)
	}
	reportOnly := valid("report-only")
	reportOnly.Spec.Healing = &hactlv1.HealingSpec{} // no autoReplace: no spares or key needed
	if err := c.Create(ctx, reportOnly); err != nil {
		t.Errorf("healing without autoReplace refused: %v", err)
	}
	for _, every := range []time.Duration{time.Minute, 15 * time.Minute, 12 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 8 * time.Hour, 24 * time.Hour} {
		e := valid("every-" + strings.ReplaceAll(strings.ToLower(every.String()), "0s", ""))
		e.Spec.Backup.Every = &metav1.Duration{Duration: every}
		if err := c.Create(ctx, e); err != nil {
			t.Errorf("every %s refused: %v", every, err)
		}
	}

	for _, tc := range []struct {
		name   string
		mutate func(*hactlv1.EtcdCluster)
		want   []string // in the API server's message: the field path and the rule's words
	}{
		{"every-7m", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 7 * time.Minute} }, []string{"spec.backup.every", "whole minutes dividing an hour"}},
		{"every-90m", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 90 * time.Minute} }, []string{"spec.backup.every", "whole hours dividing a day"}},
		{"every-5h", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 5 * time.Hour} }, []string{"spec.backup.every", "whole hours dividing a day"}},
		{"every-150s", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 150 * time.Second} }, []string{"spec.backup.every", "whole minutes"}},
		{"every-25m", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 25 * time.Minute} }, []string{"spec.backup.every", "whole minutes dividing an hour"}},
		{"every-30s", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Every = &metav1.Duration{Duration: 30 * time.Second} }, []string{"spec.backup.every", "between 1m and 24h"}},
		{"every-fraction", func(e *hactlv1.EtcdCluster) {
			e.Spec.Backup.Every = &metav1.Duration{Duration: time.Minute + 500*time.Millisecond}
		}, []string{"spec.backup.every", "whole minutes dividing an hour"}},
		{"retention-zero", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Retention.KeepLast = ptr.To[int32](0) }, []string{"spec.backup.retention.keepLast", "greater than or equal to 1"}},
		{"retention-none", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.Retention = &hactlv1.Retention{} }, []string{"spec.backup.retention", "keepLast, keepHourly or keepDaily"}},
		{"retention-daily-zero", func(e *hactlv1.EtcdCluster) {
			e.Spec.Backup.Retention = &hactlv1.Retention{KeepDaily: ptr.To[int32](0)}
		}, []string{"spec.backup.retention.keepDaily", "greater than or equal to 1"}},
		{"url-http", func(e *hactlv1.EtcdCluster) { e.Spec.Members[1].ClientURL = "http://10.0.0.12:2379" }, []string{"spec.members[1].clientURL", "https URL"}},
		{"url-nohost", func(e *hactlv1.EtcdCluster) { e.Spec.Members[0].ClientURL = "https://" }, []string{"spec.members[0].clientURL", "https URL"}},
		{"url-garbage", func(e *hactlv1.EtcdCluster) { e.Spec.Members[2].ClientURL = "10.0.0.13:2379" }, []string{"spec.members[2].clientURL"}},
		{"no-members", func(e *hactlv1.EtcdCluster) { e.Spec.Members = nil }, []string{"spec.members"}},
		{"cluster-id", func(e *hactlv1.EtcdCluster) { e.Spec.ClusterID = "NOT-HEX" }, []string{"spec.clusterID", "should match"}},
		{"election", func(e *hactlv1.EtcdCluster) {
			e.Spec.ElectionTimeout = &metav1.Duration{Duration: 10 * time.Millisecond}
		}, []string{"spec.electionTimeout", "100ms and 50s"}},
		{"window", func(e *hactlv1.EtcdCluster) { e.Spec.Maintenance.Window.Start = "25:00" }, []string{"spec.maintenance.window.start"}},
		{"defrag", func(e *hactlv1.EtcdCluster) { e.Spec.Maintenance.DefragThresholdPercent = 5 }, []string{"spec.maintenance.defragThresholdPercent"}},
		{"plain-and-ca", func(e *hactlv1.EtcdCluster) {
			e.Spec.Backup.ObjectStore.PlainHTTP, e.Spec.Backup.ObjectStore.CASecret = true, &hactlv1.SecretRef{Name: "ca"}
		}, []string{"spec.backup.objectStore", "exclude each other"}},
		{"recipient", func(e *hactlv1.EtcdCluster) { e.Spec.Backup.EncryptionRecipients = []string{"ssh-ed25519 AAAA"} }, []string{"spec.backup.encryptionRecipients[0]"}},
		// Healing (issue 16's bad input).
		{"autoreplace-no-spares", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares = nil }, []string{"spec.healing", "autoReplace needs spares"}},
		{"autoreplace-no-key", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.SSHKeySecret = nil }, []string{"spec.healing", "autoReplace needs sshKeySecret"}},
		{"grace-short", func(e *hactlv1.EtcdCluster) {
			e.Spec.ElectionTimeout = &metav1.Duration{Duration: 5 * time.Second}
			e.Spec.Healing.GracePeriod = &metav1.Duration{Duration: 14 * time.Second}
		}, []string{"spec", "gracePeriod must be at least 3 × spec.electionTimeout"}},
		{"grace-long", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.GracePeriod = &metav1.Duration{Duration: 25 * time.Hour} }, []string{"spec.healing.gracePeriod", "at most 24h"}},
		{"spare-is-member", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares[0].Name = "cp-b" }, []string{"spec", "a spare must not be a member"}},
		{"spare-member-address", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares[0].Address = "fd00::13" }, []string{"spec", "a spare must not be a member"}},
		{"spare-dns", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares[0].Address = "spare-a.example" }, []string{"spec.healing.spares[0].address", "IPv4 or IPv6 literal"}},
		{"spare-no-hostkeys", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares[0].HostKeys = nil }, []string{"spec.healing.spares[0].hostKeys"}},
		{"autoreplace-no-member", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Member = nil }, []string{"spec.healing", "autoReplace needs member"}},
		{"member-version", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Member.Version = "3.6" }, []string{"spec.healing.member.version"}},
		{"member-datadir", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Member.DataDir = "var/lib/etcd" }, []string{"spec.healing.member.dataDir"}},
		{"spare-bad-hostkey", func(e *hactlv1.EtcdCluster) { e.Spec.Healing.Spares[0].HostKeys = []string{"not a key"} }, []string{"spec.healing.spares[0].hostKeys[0]"}},
	} {
		e := valid(tc.name)
		tc.mutate(e)
		err := c.Create(ctx, e)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the API server's refusal lacks %q: %v", tc.name, w, err)
			}
		}
	}

	// A heal that uses up the pool: autoReplace stays on with no spares (the operator's own update
	// after a heal); switching it on again without spares is refused.
	pool := valid("pool")
	if err := c.Create(ctx, pool); err != nil {
		t.Fatalf("a valid EtcdCluster with healing is refused: %v", err)
	}
	pool.Spec.Healing.Spares = nil
	if err := c.Update(ctx, pool); err != nil {
		t.Errorf("emptying the spare pool with autoReplace on: %v, want accepted", err)
	}
	pool.Spec.Healing.AutoReplace = false
	if err := c.Update(ctx, pool); err != nil {
		t.Fatalf("autoReplace off: %v", err)
	}
	pool.Spec.Healing.AutoReplace = true
	if err := c.Update(ctx, pool); err == nil || !strings.Contains(err.Error(), "autoReplace needs spares") {
		t.Errorf("autoReplace switched on with no spares: %v, want refused", err)
	}

	// The cluster's identity is immutable.
	ok.Spec.ClusterID = "beef"
	if err := c.Update(ctx, ok); err == nil || !strings.Contains(err.Error(), "spec.clusterID") || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing clusterID: %v, want refused as immutable", err)
	}

	snap := &hactlv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "default"},
		Spec:       hactlv1.EtcdSnapshotSpec{ClusterName: "ok", Key: "20261201T030500Z-slot"},
	}
	if err := c.Create(ctx, snap); err != nil {
		t.Fatalf("a valid EtcdSnapshot is refused: %v", err)
	}
	if snap.Spec.DeletionPolicy != hactlv1.DeletionRetain {
		t.Errorf("deletionPolicy default %q, want Retain", snap.Spec.DeletionPolicy)
	}
	snap.Spec.Key = "20261201T031000Z-slot"
	if err := c.Update(ctx, snap); err == nil || !strings.Contains(err.Error(), "key is immutable") {
		t.Errorf("changing key: %v, want refused", err)
	}
	for name, s := range map[string]hactlv1.EtcdSnapshotSpec{
		"bad-policy": {ClusterName: "ok", DeletionPolicy: "Maybe"},
		"bad-key":    {ClusterName: "ok", Key: "../../etc/passwd"},
		"no-cluster": {},
	} {
		err := c.Create(ctx, &hactlv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: s})
		if err == nil || !strings.Contains(err.Error(), "spec.") {
			t.Errorf("EtcdSnapshot %s: %v, want refused naming the field", name, err)
		}
	}
}
