package take

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
)

// TestChoose: the reachable leader by default; with --member that member's endpoint, reachable or
// not (Run then names it unreachable); nothing without a reachable leader.
func TestChoose(t *testing.T) {
	var members []etcd.Member
	for i, n := range []string{"cp-a", "cp-b", "cp-c"} {
		members = append(members, etcd.Member{Name: n, Address: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), ClientPort: 2379, PeerPort: 2380})
	}
	st := &etcd.ClusterStatus{Endpoints: []etcd.EndpointStatus{
		{Endpoint: members[0].ClientURL(), Reachable: true, MemberName: "cp-a"},
		{Endpoint: members[1].ClientURL(), Reachable: true, IsLeader: true, MemberName: "cp-b"},
		{Endpoint: members[2].ClientURL()},
	}}
	for _, tc := range []struct{ member, want string }{{"", "cp-b"}, {"cp-a", "cp-a"}, {"cp-c", members[2].ClientURL()}} {
		got := choose(st, members, tc.member)
		if got == nil || (got.MemberName != tc.want && got.Endpoint != tc.want) {
			t.Errorf("choose(%q) = %+v, want %s", tc.member, got, tc.want)
		}
	}
	st.Endpoints[1].Reachable = false
	if got := choose(st, members, ""); got != nil {
		t.Errorf("no reachable leader: chose %+v", got)
	}
}

// TestReportPrint: a stored snapshot is one row; a skipped run prints nothing (stderr said why).
func TestReportPrint(t *testing.T) {
	var b bytes.Buffer
	(&Report{Skipped: "member cp-a is not the leader (leader: cp-b): no snapshot taken"}).Print(&b)
	if b.Len() != 0 {
		t.Errorf("skipped run printed %q", b.String())
	}
	(&Report{Snapshot: &backup.Metadata{Key: "k.db.zst", Revision: 9, MemberName: "cp-b", DBSizeBytes: 20480, StoredSizeBytes: 611, StoredSHA256: "abc"}}).Print(&b)
	want := "KEY       REVISION  MEMBER  DB SIZE  STORED  SHA256\nk.db.zst  9         cp-b    20480    611     abc\n"
	if b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
}
