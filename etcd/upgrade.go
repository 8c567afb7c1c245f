package etcd

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// UpgradeError refuses a change of spec.etcd.version that etcd's upgrade guide does not allow
// (etcd.io/docs/v3.6/upgrades: "upgrade one minor version at a time"; a downgrade needs etcd's
// downgrade procedure, not a binary swap). Member is the member running From. Exit code 2.
type UpgradeError struct {
	Member, From, To string
	Downgrade        bool
	// MinPatch is set when From's patch release is too old to upgrade from: the oldest patch of
	// From's minor that may move to To's minor (MinPatchBeforeV36).
	MinPatch string
}

func (e *UpgradeError) Error() string {
	if e.MinPatch != "" {
		return fmt.Sprintf("spec.etcd.version %s: the %s member %s must first be upgraded to %s or later (etcd blog, 2025-12-21, "+
			"\"Avoiding Zombie Cluster Members When Upgrading to etcd v3.6\": older v3.5 patches can hold membership data that "+
			"v3.6 reads differently); set spec.etcd.version to the newest v3.5 patch, run bootstrap, then %s", e.To, e.From, e.Member, e.MinPatch, e.To)
	}
	if e.Downgrade {
		return fmt.Sprintf("spec.etcd.version %s is older than the %s member %s runs: etcd does not support a downgrade by swapping binaries (its data may use the newer version's storage format); put %s back in spec.etcd.version", e.To, e.From, e.Member, e.From)
	}
	return fmt.Sprintf("spec.etcd.version %s skips a minor version from the %s member %s runs: etcd upgrades one minor version at a time (etcd's upgrade guide); upgrade to the next minor first (e.g. the newest %s), then to %s", e.To, e.From, e.Member, nextMinor(e.From), e.To)
}

// ExitCode: refused input.
func (e *UpgradeError) ExitCode() int { return 2 }

// MinPatchBeforeV36 is the oldest v3.5 patch release that may be upgraded to v3.6: v3.5.20 fixed
// learner promotions kept only in the v2store (etcd blog 2025-03, "How to Prevent a Common Failure
// when Upgrading etcd v3.5 to v3.6"), v3.5.26 syncs the v3store's members from the v2store (etcd
// blog 2025-12-21, zombie members); etcd asks for v3.5.26 or later before v3.6.
const MinPatchBeforeV36 = "v3.5.26"

// CheckUpgrade checks moving member's running version from to spec version to: nil for the same
// version, a patch change, or the next minor; *UpgradeError for a downgrade, a skipped minor, or
// v3.5 older than MinPatchBeforeV36 to v3.6. An unparsable version is not judged (nil): the
// binaries' own check reports it.
func CheckUpgrade(member, from, to string) error {
	f, okF := parseVersion(from)
	t, okT := parseVersion(to)
	if !okF || !okT {
		return nil
	}
	// The release numbers only: a pre-release of the same numbers is neither older nor newer here.
	switch {
	case slices.Compare(t.Components(), f.Components()) < 0:
		return &UpgradeError{Member: member, From: "v" + strings.TrimPrefix(from, "v"), To: to, Downgrade: true}
	case t.Major() != f.Major() || t.Minor() > f.Minor()+1:
		return &UpgradeError{Member: member, From: "v" + strings.TrimPrefix(from, "v"), To: to}
	case f.Major() == 3 && f.Minor() == 5 && t.Minor() == 6:
		if min, _ := parseVersion(MinPatchBeforeV36); f.Patch() < min.Patch() {
			return &UpgradeError{Member: member, From: "v" + strings.TrimPrefix(from, "v"), To: to, MinPatch: MinPatchBeforeV36}
		}
	}
	return nil
}

// MinorOf is version's major.minor with a ".0" patch ("v3.6.16" → "3.6.0"): the cluster version
// etcd reports once every member runs that minor (etcd's /version "etcdcluster"). "" when version
// does not parse.
func MinorOf(version string) string {
	v, ok := parseVersion(version)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d.%d.0", v.Major(), v.Minor())
}

// parseVersion parses an etcd release version, "v" optional ("v3.6.16", "3.5.26", "3.6.0-rc.1"),
// with k8s.io/apimachinery/pkg/util/version's semantic parser; false when s is not one.
func parseVersion(s string) (*version.Version, bool) {
	v, err := version.ParseSemantic(s)
	if err != nil {
		return nil, false
	}
	return v, true
}

func nextMinor(from string) string {
	v, ok := parseVersion(from)
	if !ok {
		return "next minor"
	}
	return fmt.Sprintf("v%d.%d.x", v.Major(), v.Minor()+1)
}
