package bootstrap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// liveCluster is a running cluster as seen through the TLS client (MemberList is linearizable, so
// an answer proves quorum).
type liveCluster struct {
	clusterID uint64
	members   []liveMember
}

type liveMember struct {
	id       uint64
	name     string // empty for a member that was added but never started
	peerURLs []string
	learner  bool
}

// byPeerURL finds the live member advertising peerURL.
func (l *liveCluster) byPeerURL(peerURL string) *liveMember {
	if l == nil {
		return nil
	}
	for i := range l.members {
		for _, u := range l.members[i].peerURLs {
			if u == peerURL {
				return &l.members[i]
			}
		}
	}
	return nil
}

// MemberDataLostError refuses to re-bootstrap a member whose data directory is gone while the
// cluster still lists it: starting it empty would make it vote with a blank raft log.
type MemberDataLostError struct {
	Host    string
	ID      string
	DataDir string
	Running bool
}

func (e *MemberDataLostError) Error() string {
	if e.Running {
		return fmt.Sprintf("%s: etcd member %s (ID %s) is still in the running cluster but its data dir %s is empty: "+
			"hactl will not start it as a new member (that would break the cluster). Remove it from a healthy member with "+
			"`etcdctl member remove %s` (or restore the data dir), then re-run `hactl bootstrap` to add it back as a new member",
			e.Host, e.Host, e.ID, e.DataDir, e.ID)
	}
	return fmt.Sprintf("%s: etcd member %s (ID %s) of a cluster that already formed has lost its data dir %s and the cluster "+
		"has no quorum: hactl will not re-bootstrap it. Bring the other members back first (then remove and re-add this one), "+
		"or restore the cluster from a snapshot", e.Host, e.Host, e.ID, e.DataDir)
}

// detect asks the members' client URLs whether a cluster is already running.
func (b *Bootstrapper) detect(ctx context.Context) error {
	formedBefore := b.st.ClusterID != ""
	anyData := false
	for _, f := range b.facts {
		anyData = anyData || f.Data == DataMember
	}
	if !b.creds.ready() && b.recovery != nil {
		b.p.Infof("  not asked: the client certificate is created when bootstrap recovers the state dir (the plan assumes the members with data keep running)")
		return nil
	}
	if !b.creds.ready() || (!formedBefore && !anyData) {
		b.p.Infof("  no running cluster: nothing has etcd data yet")
		return nil
	}
	endpoints := b.knownClientURLs()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := etcd.NewClient(dctx, endpoints, b.creds.tls, 3*time.Second, b.etcdDial())
	if err != nil {
		b.p.Infof("  no running cluster reachable: %v", err)
		return nil
	}
	defer cli.Close()
	resp, err := cli.MemberList(dctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isAuthError(err) {
			return fmt.Errorf("detect: the members at %s refuse hactl's client certificate (%s): is spec.stateDir "+
				"this cluster's state dir? hactl will not go on without knowing whether the cluster is running: %w",
				strings.Join(endpoints, ","), b.creds.tls.Cert, err)
		}
		b.p.Infof("  no quorum reachable through %s: %v", strings.Join(endpoints, ","), err)
		return nil
	}
	l := &liveCluster{clusterID: resp.Header.ClusterId}
	for _, m := range resp.Members {
		l.members = append(l.members, liveMember{id: m.ID, name: m.Name, peerURLs: m.PeerURLs, learner: m.IsLearner})
	}
	b.live = l
	b.p.Infof("  running cluster %x with %d members", l.clusterID, len(l.members))
	if b.st.ClusterID != "" && b.st.ClusterID != fmt.Sprintf("%x", l.clusterID) {
		return fmt.Errorf("the members answer as etcd cluster %x but the state dir recorded cluster %s: the hosts were "+
			"re-bootstrapped or restored outside this state dir; refusing to continue", l.clusterID, b.st.ClusterID)
	}
	return nil
}

// knownClientURLs lists the spec's client URLs and those recorded in the state dir (they differ
// after spec.etcd.clientPort changed), without duplicates.
func (b *Bootstrapper) knownClientURLs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, m := range b.members {
		add(m.clientURL)
	}
	for _, m := range b.members {
		if rec := b.st.Members[m.Name]; rec != nil {
			add(rec.ClientURL)
		}
	}
	return out
}

// isAuthError reports TLS failures (a certificate the members do not accept, or a CA that does not
// match theirs). Typed errors are recognised where they survive (a dial outside gRPC); gRPC
// flattens the transport's handshake error into its status message ("transport: authentication
// handshake failed: ..."), so that text is matched as well.
func isAuthError(err error) bool {
	var verr *tls.CertificateVerificationError
	var alert tls.AlertError
	var uae x509.UnknownAuthorityError
	var cie x509.CertificateInvalidError
	var hne x509.HostnameError
	if errors.As(err, &verr) || errors.As(err, &alert) || errors.As(err, &uae) || errors.As(err, &cie) || errors.As(err, &hne) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "authentication handshake failed") || strings.Contains(s, "x509:") ||
		strings.Contains(s, "bad certificate") || strings.Contains(s, "unknown certificate authority")
}

// PeerURLChangedError refuses to restart a member of a formed cluster under a different peer URL:
// etcd keeps peer URLs in its membership (etcd docs, "runtime reconfiguration": update a member).
type PeerURLChangedError struct {
	Host, ID, Old, New string
}

func (e *PeerURLChangedError) Error() string {
	return fmt.Sprintf("%s: peer URL changed from %s to %s (spec.etcd.peerPort or the host's address changed); etcd keeps "+
		"peer URLs in its membership, so restarting with the new one would cut the member off. Put the old value back in the "+
		"spec; to really move the member, run `etcdctl member update %s --peer-urls=%s` first, one member at a time",
		e.Host, e.Old, e.New, e.ID, e.New)
}

// plan decides, per member, what to do, and prints it. It refuses unsafe situations (lost data dirs,
// another cluster's data) with errors naming the host and what to do.
func (b *Bootstrapper) plan(ctx context.Context) error {
	var errs *multierror.Error
	joinCluster := b.liveInitialCluster()
	for _, m := range b.members {
		f := b.facts[m.Name]
		p := &hostPlan{}
		b.plans[m.Name] = p
		hasData := f.Data == DataMember
		if hasData && (f.Marker == nil || f.Marker.Token != b.st.Token) {
			other := "no hactl marker"
			if f.Marker != nil {
				other = fmt.Sprintf("cluster %q, token %s", f.Marker.Cluster, f.Marker.Token)
			}
			errs = multierror.Append(errs, fmt.Errorf("%s: data dir %s holds etcd data that is not this cluster's (%s; this cluster's token is %s): "+
				"hactl never overwrites it; move it aside (e.g. mv %s %s.old) if it is not needed",
				m.Name, b.spec.Spec.Etcd.DataDir, other, b.st.Token, b.spec.Spec.Etcd.DataDir, b.spec.Spec.Etcd.DataDir))
			continue
		}
		known := b.st.Members[m.Name] != nil && b.st.Members[m.Name].ID != "" // a member before this run
		rec := b.memberRecord(m)
		if rec.PeerURL != m.peerURL {
			if b.formed() || b.live != nil {
				errs = multierror.Append(errs, &PeerURLChangedError{Host: m.Name, ID: orDash(rec.ID), Old: rec.PeerURL, New: m.peerURL})
				continue
			}
			rec.PeerURL, rec.ClientURL = m.peerURL, m.clientURL
		}
		if !b.formed() && b.live == nil && rec.InitialClusterState == "new" {
			// The cluster never formed: the founding flags follow the spec (hosts or ports may have
			// been corrected since an earlier, failed run).
			rec.InitialCluster = b.foundingCluster()
		}
		lm := b.live.byPeerURL(m.peerURL)
		switch {
		case b.live == nil && b.formed() && !hasData && known:
			errs = multierror.Append(errs, &MemberDataLostError{Host: m.Name, ID: orDash(rec.ID), DataDir: b.spec.Spec.Etcd.DataDir})
			continue
		case b.live == nil && b.formed() && !hasData:
			errs = multierror.Append(errs, fmt.Errorf("%s: is a new member for cluster %s, but no quorum answers at %s: a member can only "+
				"join a running cluster; bring the existing members back first (hactl status), then re-run",
				m.Name, orDash(b.st.ClusterID), strings.Join(b.knownClientURLs(), ",")))
			continue
		case b.live == nil && !hasData:
			p.action = report.ActionCreate
			if f.Marker != nil || f.EtcdActive == "active" || f.EtcdActive == "activating" {
				p.action = report.ActionResume
			}
		case b.live == nil: // data present, cluster not answering: start what is stopped
			p.action = report.ActionUnchanged
			if f.EtcdActive != "active" {
				p.action = report.ActionStart
			}
		case lm != nil && lm.name != "" && !hasData:
			errs = multierror.Append(errs, &MemberDataLostError{Host: m.Name, ID: fmt.Sprintf("%x", lm.id), DataDir: b.spec.Spec.Etcd.DataDir, Running: true})
			continue
		case lm != nil && lm.name == "" && !hasData: // added (or founding) but never started
			p.id = lm.id
			p.action = report.ActionResume
			if lm.learner || rec.InitialClusterState == "existing" {
				p.action = report.ActionJoin
				if rec.InitialClusterState != "existing" { // no record of the join (e.g. state dir restored)
					rec.InitialCluster = strings.Join(joinCluster, ",")
					rec.InitialClusterState = "existing"
				}
			}
		case lm != nil:
			p.id = lm.id
			p.action = report.ActionUnchanged
			if f.EtcdActive != "active" {
				p.action = report.ActionStart
			}
			if lm.learner {
				p.action = report.ActionJoin // promote still pending
			}
		case hasData: // not a member of the running cluster but holds our data: removed earlier
			errs = multierror.Append(errs, fmt.Errorf("%s: holds data of this cluster but is not a member of the running cluster (removed?): "+
				"move %s aside (hactl never deletes it), then re-run to add it as a new member", m.Name, b.spec.Spec.Etcd.DataDir))
			continue
		default: // a new host for a running cluster
			p.action = report.ActionJoin
			joinCluster = append(joinCluster, m.Name+"="+m.peerURL)
			rec.InitialCluster = strings.Join(joinCluster, ",")
			rec.InitialClusterState = "existing"
		}
		if p.id != 0 {
			rec.ID = fmt.Sprintf("%x", p.id)
		}
		files, err := b.desiredFiles(m, rec)
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		for _, df := range files {
			if df.Sum == "" || f.Sums[df.Path] != df.Sum {
				if df.Note == "" {
					df.Note = "changed"
					if f.Sums[df.Path] == "" {
						df.Note = "new"
					}
				}
				p.upload = append(p.upload, df)
			}
		}
		p.download = b.needsDownload(f)
		restartWorthy := p.download
		for _, df := range p.upload {
			// etcd reads neither the marker nor the CA key (kept on members for recovery only).
			if df.Path != remoteMarker && df.Path != filepath.Join(remotePKIDir, "ca.key") {
				restartWorthy = true
			}
		}
		if restartWorthy && p.action == report.ActionUnchanged {
			p.action = report.ActionUpdate
		}
		p.restart = p.action != report.ActionUnchanged && !(p.action == report.ActionResume && f.EtcdActive == "active" && !restartWorthy)
		if p.action == report.ActionJoin && lm != nil && lm.learner && f.EtcdActive == "active" {
			p.restart = restartWorthy
		}
	}
	if b.live != nil {
		for _, lm := range b.live.members {
			if !b.inSpec(lm) {
				b.p.Warnf("etcd member %s (ID %x, %s) is in the cluster but not in the spec; hactl leaves it alone (remove it with etcdctl member remove if it is gone)",
					orDash(lm.name), lm.id, strings.Join(lm.peerURLs, ","))
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	b.printPlan()
	return nil
}

func (b *Bootstrapper) inSpec(lm liveMember) bool {
	for _, m := range b.members {
		for _, u := range lm.peerURLs {
			if u == m.peerURL {
				return true
			}
		}
	}
	return false
}

// liveInitialCluster lists every member of the running cluster as name=peerURL, the start of a
// joining member's --initial-cluster. etcd checks a joiner's list against the membership by peer URL
// (member count included), so members added but not started yet are listed too, under their spec
// name (or with an empty name, as etcdctl member add prints them).
func (b *Bootstrapper) liveInitialCluster() []string {
	if b.live == nil {
		return nil
	}
	var out []string
	for _, lm := range b.live.members {
		for _, u := range lm.peerURLs {
			name := lm.name
			for _, m := range b.members {
				if m.peerURL == u {
					name = m.Name
				}
			}
			out = append(out, name+"="+u)
		}
	}
	return out
}

func (b *Bootstrapper) printPlan() {
	var rows [][]string
	for _, m := range b.members {
		p := b.plans[m.Name]
		what := "-"
		var parts []string
		if p.download {
			d := b.spec.Spec.Etcd.Download
			parts = append(parts, fmt.Sprintf("download %s (sha256 %s)", d.URL, shortSum(strings.ToLower(d.SHA256))))
		}
		if len(p.upload) > 0 {
			byNote := map[string][]string{}
			var notes []string
			for _, f := range p.upload {
				if byNote[f.Note] == nil {
					notes = append(notes, f.Note)
				}
				byNote[f.Note] = append(byNote[f.Note], filepath.Base(f.Path))
			}
			for _, n := range notes {
				parts = append(parts, n+": "+strings.Join(byNote[n], " "))
			}
		}
		if len(parts) > 0 {
			what = strings.Join(parts, "; ")
		}
		restart := "no"
		if p.restart {
			restart = "yes"
		}
		rows = append(rows, []string{m.Name, m.host.Zone, string(p.action), restart, what})
	}
	var sb strings.Builder
	ui.Table(&sb, []string{"HOST", "ZONE", "ACTION", "START/RESTART", "FILES"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		b.p.Infof("  %s", line)
	}
}
