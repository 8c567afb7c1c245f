package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/etcdtest"
	"github.com/hactl/hactl/ui"
)

// fragment writes n 10 KiB values and deletes them, so the database file has free pages once the
// history is compacted.
func fragment(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	ctx := context.Background()
	v := strings.Repeat("x", 10<<10)
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/frag/%05d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

// TestMaintenanceAgainstRealEtcd: on a real 3-member cluster, compact then defrag give the free pages
// back, the leader last; --min-fragmentation skips; a NOSPACE alarm is recovered in order and a
// CORRUPT one refused.
func TestMaintenanceAgainstRealEtcd(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cl := membership.Cluster{Endpoints: c.Endpoints(), TLS: c.Files()}
	p := ui.New(&strings.Builder{}, false, false)
	ctx := context.Background()
	cli := c.Client(t)
	fragment(t, cli, 300)

	if _, err := Compact(ctx, cl, -1); !errors.As(err, new(*InputError)) {
		t.Fatalf("--retain -1: %v", err)
	}
	cr, err := Compact(ctx, cl, 10)
	if err != nil || cr.CompactedTo != cr.Revision-10 || cr.Skipped != "" {
		t.Fatalf("compact: %+v %v", cr, err)
	}
	// Past the deletions (the newest revisions): the values are freed.
	if all, err := Compact(ctx, cl, 0); err != nil || all.CompactedTo != all.Revision {
		t.Fatalf("compact --retain 0: %+v %v", all, err)
	}
	if again, err := Compact(ctx, cl, 0); err != nil || again.Skipped == "" {
		t.Fatalf("compact again to the same revision: %+v %v, want skipped", again, err)
	}
	// etcd's dbSizeInUse counts bbolt's free pages only, not the pending ones a compaction just
	// freed, so the fragmentation it reports can lag; the defragmentation itself shows the space.

	if _, err := Defrag(ctx, DefragOptions{Cluster: cl, MinFragmentation: 101, Printer: p}); !errors.As(err, new(*InputError)) {
		t.Fatalf("--min-fragmentation 101: %v", err)
	}
	skipped, err := Defrag(ctx, DefragOptions{Cluster: cl, MinFragmentation: 100, Printer: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped.Members) != 3 {
		t.Errorf("--min-fragmentation 100: %d members reported, want 3, each skipped: %+v", len(skipped.Members), skipped.Members)
	}
	for _, m := range skipped.Members {
		if m.Skipped == "" || m.AfterBytes != 0 {
			t.Errorf("--min-fragmentation 100: %s not skipped: %+v", m.Name, m)
		}
	}
	res, err := Defrag(ctx, DefragOptions{Cluster: cl, Printer: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Members) != 3 || !res.Members[2].Leader || res.Members[0].Leader || res.Members[1].Leader {
		t.Fatalf("order %+v, want the leader last", res.Members)
	}
	for _, m := range res.Members {
		if m.FragmentationPercent < 0 || m.AfterBytes*4 >= m.BeforeBytes {
			t.Errorf("%s: %.1f%% free, %d → %d bytes: want under a quarter after", m.Name, m.FragmentationPercent, m.BeforeBytes, m.AfterBytes)
		}
	}

	// Alarms: raised through the API as etcd itself raises them.
	raise := func(alarm etcdserverpb.AlarmType) {
		t.Helper()
		st, err := etcd.Status(ctx, c.Endpoints(), c.Files())
		if err != nil {
			t.Fatal(err)
		}
		var id uint64
		fmt.Sscanf(st.Endpoints[0].MemberID, "%x", &id)
		if _, err := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
			Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: alarm}); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := Disarm(ctx, DisarmOptions{Cluster: cl, Printer: p}); err != nil || !strings.Contains(d.Plan, "no active alarm") {
		t.Fatalf("disarm without alarms: %+v %v", d, err)
	}
	raise(etcdserverpb.AlarmType_NOSPACE)
	if as, err := Alarms(ctx, cl); err != nil || len(as) != 1 || as[0].Alarm != "NOSPACE" || as[0].Member == "" {
		t.Fatalf("alarms: %+v %v", as, err)
	}
	if _, err := cli.Put(ctx, "/after-nospace", "x"); err == nil {
		t.Fatal("a put went through under NOSPACE")
	}
	dry, err := Disarm(ctx, DisarmOptions{Cluster: cl, DryRun: true, Printer: p})
	if err != nil || !strings.Contains(dry.Plan, "1. compact") || !strings.Contains(dry.Plan, "2. defragment every member") || !strings.Contains(dry.Plan, "3. disarm") {
		t.Fatalf("dry run plan: %+v %v", dry, err)
	}
	d, err := Disarm(ctx, DisarmOptions{Cluster: cl, Printer: p})
	if err != nil || d.Compact == nil || d.Defrag == nil || len(d.Disarmed) != 1 || len(d.Remaining) != 0 {
		t.Fatalf("disarm NOSPACE: %+v %v", d, err)
	}
	if _, err := cli.Put(ctx, "/after-disarm", "x"); err != nil {
		t.Fatalf("put after the recovery: %v", err)
	}
	raise(etcdserverpb.AlarmType_CORRUPT)
	var ce *CorruptError
	if _, err := Disarm(ctx, DisarmOptions{Cluster: cl, Printer: p}); !errors.As(err, &ce) {
		t.Fatalf("disarm CORRUPT: %v, want refused", err)
	}
}
