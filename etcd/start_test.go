package etcd

import "testing"

func TestStartCommand(t *testing.T) {
	for _, tc := range []struct {
		verb  string
		block bool
		want  string
	}{
		{"start", false, "{ [ -d '/var/lib/etcd x' ] || mkdir -p -m 0700 '/var/lib/etcd x'; } && systemctl daemon-reload && systemctl enable --quiet etcd.service && systemctl start --no-block etcd.service"},
		{"restart", true, "{ [ -d '/var/lib/etcd x' ] || mkdir -p -m 0700 '/var/lib/etcd x'; } && systemctl daemon-reload && systemctl enable --quiet etcd.service && systemctl restart etcd.service"},
	} {
		if got := StartCommand("/var/lib/etcd x", tc.verb, tc.block); got != tc.want {
			t.Errorf("StartCommand(%s, %v):\n got %s\nwant %s", tc.verb, tc.block, got, tc.want)
		}
	}
}

func TestMarkerFile(t *testing.T) {
	b, err := Marker{Cluster: "lab", Token: "lab-0123", Member: "cp-a"}.File()
	want := "{\n  \"cluster\": \"lab\",\n  \"token\": \"lab-0123\",\n  \"member\": \"cp-a\"\n}\n"
	if err != nil || string(b) != want {
		t.Errorf("Marker.File() = %q, %v; want %q", b, err, want)
	}
}
