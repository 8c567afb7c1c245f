package templates

import (
	"strings"
	"testing"
)

func TestSystemdArg(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"--name=cp-a", "--name=cp-a", false},
		{"--initial-cluster=a=https://[fd00::1]:2380,b=https://10.0.0.2:2380", "--initial-cluster=a=https://[fd00::1]:2380,b=https://10.0.0.2:2380", false},
		{"--data-dir=/var/lib/my etcd", `"--data-dir=/var/lib/my etcd"`, false},
		{"100%", "100%%", false},
		{"$HOME", "$$HOME", false},
		{`a"b\c`, `"a\"b\\c"`, false},
		{"", `""`, false},
		{"a\nb", "", true},
	}
	for _, tt := range tests {
		got, err := SystemdArg(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("SystemdArg(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	if _, err := Render("nope.tmpl", nil); err == nil {
		t.Error("Render of a missing template succeeded")
	}
	_, err := Render("etcd.service.tmpl", map[string]any{"Name": "x"})
	if err == nil || !strings.Contains(err.Error(), "etcd.service.tmpl") {
		t.Errorf("Render with missing keys: %v, want an error naming the template", err)
	}
	if _, err := Render("etcd.service.tmpl", struct{}{}); err == nil {
		t.Error("Render with a struct lacking fields succeeded")
	}
}
