package shell

import (
	"os/exec"
	"testing"
)

var cases = []struct{ in, want string }{
	{"", "''"},
	{"/etc/etcd/pki", "/etc/etcd/pki"},
	{"root:root", "root:root"},
	{"a b", "'a b'"},
	{"it's", `'it'\''s'`},
	{"$(reboot)", "'$(reboot)'"},
	{"a\nb", "'a\nb'"},
	{"*", "'*'"},
}

func TestQuote(t *testing.T) {
	for _, tt := range cases {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestRoundTrip: every quoted word reaches a real /bin/sh as exactly one argument, unchanged.
func TestRoundTrip(t *testing.T) {
	for _, tt := range cases {
		out, err := exec.Command("/bin/sh", "-c", `printf '%s|' "$#"; printf %s `+Quote(tt.in)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != "0|"+tt.in {
			t.Errorf("round trip of %q gave %q", tt.in, out)
		}
	}
	var words []string
	for _, tt := range cases {
		words = append(words, tt.in)
	}
	out, err := exec.Command("/bin/sh", "-c", `set -- `+Join(words...)+`; printf '%s\n' "$#"; for w; do printf '[%s]' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "8\n"
	for _, w := range words {
		want += "[" + w + "]"
	}
	if string(out) != want {
		t.Errorf("Join round trip gave %q, want %q", out, want)
	}
	if Join() != "" {
		t.Errorf("Join() = %q", Join())
	}
}
