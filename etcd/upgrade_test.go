package etcd

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		from, to  string
		refused   bool
		downgrade bool
	}{
		{"3.6.16", "v3.6.16", false, false},
		{"3.5.30", "v3.6.16", false, false}, // the next minor
		{"3.5.26", "v3.6.0", false, false},  // the oldest v3.5 that may move to v3.6
		{"3.5.25", "v3.6.16", true, false},  // zombie members: v3.5.26 first
		{"3.5.19", "v3.5.36", false, false}, // a patch upgrade within v3.5 is how to get there
		{"3.6.10", "v3.6.16", false, false}, // a patch
		{"3.6.16", "v3.6.10", true, true},   // a patch downgrade
		{"3.6.16", "v3.5.30", true, true},
		{"3.4.37", "v3.6.16", true, false}, // skips 3.5
		{"2.3.8", "v3.0.0", true, false},   // another major
		{"", "v3.6.16", false, false},      // unknown: not judged
	} {
		err := CheckUpgrade("cp-a", tc.from, tc.to)
		var ue *UpgradeError
		if (err != nil) != tc.refused || (err != nil && (!errors.As(err, &ue) || ue.Downgrade != tc.downgrade || ue.ExitCode() != 2)) {
			t.Errorf("CheckUpgrade(%s → %s) = %v, refused want %v (downgrade %v)", tc.from, tc.to, err, tc.refused, tc.downgrade)
		}
	}
	err := CheckUpgrade("cp-a", "3.5.25", "v3.6.16")
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.MinPatch != MinPatchBeforeV36 || !strings.Contains(err.Error(), "v3.5.26 or later") {
		t.Errorf("3.5.25 → v3.6.16: %v", err)
	}
}

func TestMinorOf(t *testing.T) {
	for in, want := range map[string]string{"v3.6.16": "3.6.0", "3.5.36": "3.5.0", "v3.6": "", "": ""} {
		if got := MinorOf(in); got != want {
			t.Errorf("MinorOf(%q) = %q, want %q", in, got, want)
		}
	}
}
