package backup

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Object layout under <prefix>/<cluster>/snapshots/ (prefix optional):
//
//	<stem>.db[.zst][.age]    the snapshot (etcd's DB stream, optionally zstd-compressed, then age-encrypted)
//	<stem>.json              its Metadata, written LAST: a snapshot without it is incomplete
//	<stem>.verified.json     a VerifiedMarker, written by a successful verify
//
// A stem is "<UTC time>-rev<revision, 15 digits>-<member>" (time and revision at snapshot start),
// or "<slot>-slot" for a scheduled run (one key per slot whichever member takes it), so keys sort
// by time without reading anything.
const (
	// TimeFormat is the UTC time in object names: 20261201T030500Z.
	TimeFormat  = "20060102T150405Z"
	dataExt     = ".db"
	zstdExt     = ".zst"
	ageExt      = ".age"
	metaExt     = ".json"
	verifiedExt = ".verified.json"
)

var (
	stemRE = regexp.MustCompile(`^(\d{8}T\d{6}Z)-(?:rev(\d{15})-([a-z0-9]([a-z0-9-]*[a-z0-9])?)|(slot))$`)
	// slotRE: a slot is the scheduled wall-clock time, in TimeFormat.
	slotRE = regexp.MustCompile(`^\d{8}T\d{6}Z$`)
)

// SnapshotsPrefix is the key prefix of a cluster's snapshots: "<prefix>/<cluster>/snapshots/"
// (prefix may be empty).
func SnapshotsPrefix(prefix, cluster string) string {
	return path.Join(prefix, cluster, "snapshots") + "/"
}

// Stem returns the name stem of a snapshot taken at t (UTC, whole seconds) at revision rev from
// member, or of the scheduled slot when slot is set (see the layout above).
func Stem(t time.Time, rev int64, member, slot string) (string, error) {
	if slot != "" {
		if !slotRE.MatchString(slot) {
			return "", fmt.Errorf("slot %q: must be a UTC time like %s", slot, TimeFormat)
		}
		return slot + "-slot", nil
	}
	if rev < 0 || rev > 999_999_999_999_999 {
		return "", fmt.Errorf("revision %d out of range", rev)
	}
	s := fmt.Sprintf("%s-rev%015d-%s", t.UTC().Format(TimeFormat), rev, member)
	if !stemRE.MatchString(s) {
		return "", fmt.Errorf("member name %q: must be an RFC 1123 label", member)
	}
	return s, nil
}

// DataExt returns the data object's extension for a compression and whether it is encrypted.
func DataExt(compression string, encrypted bool) string {
	ext := dataExt
	if compression == "zstd" {
		ext += zstdExt
	}
	if encrypted {
		ext += ageExt
	}
	return ext
}

// stemInfo is what a stem tells without reading anything.
type stemInfo struct {
	Time     time.Time
	Revision int64 // 0 for slot stems
	Member   string
	Slot     string
}

func parseStem(s string) (stemInfo, bool) {
	m := stemRE.FindStringSubmatch(s)
	if m == nil {
		return stemInfo{}, false
	}
	t, err := time.Parse(TimeFormat, m[1])
	if err != nil {
		return stemInfo{}, false
	}
	si := stemInfo{Time: t}
	if m[5] == "slot" {
		si.Slot = m[1]
		return si, true
	}
	si.Revision, _ = strconv.ParseInt(m[2], 10, 64)
	si.Member = m[3]
	return si, true
}

// objectKind classifies a key under SnapshotsPrefix: "data", "meta", "verified" or "" (unknown),
// with its stem.
func objectKind(base string) (kind, stem string) {
	switch {
	case strings.HasSuffix(base, verifiedExt):
		return "verified", strings.TrimSuffix(base, verifiedExt)
	case strings.HasSuffix(base, metaExt):
		return "meta", strings.TrimSuffix(base, metaExt)
	}
	for _, ext := range []string{dataExt + zstdExt + ageExt, dataExt + zstdExt, dataExt + ageExt, dataExt} {
		if strings.HasSuffix(base, ext) {
			return "data", strings.TrimSuffix(base, ext)
		}
	}
	return "", ""
}
