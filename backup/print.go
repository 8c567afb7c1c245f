package backup

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hactl/hactl/ui"
)

// Print writes the complete snapshots as a table (time, revision, member, stored bytes,
// compression, encryption, when verified, name), oldest first; one line when there is none.
func (l *Listing) Print(w io.Writer) {
	if len(l.Snapshots) == 0 {
		fmt.Fprintf(w, "no complete snapshot under %s\n", l.Prefix)
		return
	}
	var rows [][]string
	for _, sn := range l.Snapshots {
		m := sn.Metadata
		enc, ver := "no", "-"
		if m.Encrypted() {
			enc = "age"
		}
		if sn.Verified != nil {
			ver = sn.Verified.VerifiedAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{sn.Time.UTC().Format(time.RFC3339), fmt.Sprint(m.Revision), m.MemberName,
			fmt.Sprint(m.StoredSizeBytes), m.Compression, enc, ver, sn.Stem})
	}
	ui.Table(w, []string{"TIME", "REVISION", "MEMBER", "STORED BYTES", "COMPRESSION", "ENCRYPTED", "VERIFIED", "NAME"}, rows)
}

// Warnings are the listing's notes for stderr: objects under the prefix that are not snapshots
// (data without metadata, unfinished uploads) and metadata that could not be read. One line each,
// no trailing newline.
func (l *Listing) Warnings() []string {
	var out []string
	if n := len(l.Orphans) + len(l.Incomplete); n > 0 {
		out = append(out, fmt.Sprintf("%d data object(s) without metadata and %d unfinished upload(s) under %s are not snapshots (prune removes them after --incomplete-older-than)", len(l.Orphans), len(l.Incomplete), l.Prefix))
	}
	for _, pr := range l.Problems {
		out = append(out, "unreadable metadata: "+pr)
	}
	return out
}

// Print writes the plan: a row per snapshot (keep or delete, time, key relative to the listing's
// prefix, the rules keeping it), the orphans and incomplete uploads it removes, and the counts.
func (p *PrunePlan) Print(w io.Writer) {
	var rows [][]string
	for _, d := range p.Decisions {
		action := "delete"
		if d.Keep {
			action = "keep"
		}
		rows = append(rows, []string{action, d.Time.UTC().Format(time.RFC3339), strings.TrimPrefix(d.Key, p.prefix), cmp.Or(strings.Join(d.Reasons, ", "), "-")})
	}
	if len(rows) > 0 {
		ui.Table(w, []string{"ACTION", "TIME", "OBJECT", "KEPT BY"}, rows)
	}
	for _, o := range p.Orphans {
		fmt.Fprintf(w, "delete orphan %s (no metadata, modified %s)\n", o.Key, o.LastModified.UTC().Format(time.RFC3339))
	}
	for _, u := range p.Incomplete {
		fmt.Fprintf(w, "abort incomplete upload %s (started %s)\n", u.Key, u.Initiated.UTC().Format(time.RFC3339))
	}
	if n := len(p.Deltas); n > 0 {
		fmt.Fprintf(w, "delete %d delta(s) of revisions %d-%d (before every kept snapshot)\n", n, p.Deltas[0].Metadata.FromRevision+1, p.Deltas[n-1].Metadata.ToRevision)
	}
	fmt.Fprintf(w, "%d kept, %d to delete\n", len(p.Decisions)-len(p.Deletions()), len(p.Deletions()))
}

// Print writes the one-line verdict of a successful verification.
func (r *VerifyResult) Print(w io.Writer) {
	fmt.Fprintf(w, "%s: OK (revision %d, %d keys, hash %d, %d bytes, in %s)\n", r.Key, r.Revision, r.TotalKeys, r.Hash, r.TotalSizeBytes, r.Duration.Round(time.Millisecond))
}
