package etcdphases

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// LiveCluster is a running cluster as seen through the TLS client (MemberList is linearizable, so
// an answer proves quorum).
type LiveCluster struct {
	clusterID uint64
	members   []liveMember
}

// ClusterID is the running cluster's ID.
func (l *LiveCluster) ClusterID() uint64 { return l.clusterID }

type liveMember struct {
	id       uint64
	name     string // empty for a member that was added but never started
	peerURLs []string
	learner  bool
	version  string // the server version its endpoint reported ("" when it did not answer)
}

// byPeerURL finds the live member advertising peerURL.
func (l *LiveCluster) byPeerURL(peerURL string) *liveMember {
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
			"hactl will not start it as a new member (that would break the cluster). Run `hactl bootstrap --replace-lost %s`: "+
			"it removes the member (quorum-guarded) and adds the host back as a new learner, promoted once caught up",
			e.Host, e.Host, e.ID, e.DataDir, e.Host)
	}
	return fmt.Sprintf("%s: etcd member %s (ID %s) of a cluster that already formed has lost its data dir %s and the cluster "+
		"has no quorum: hactl will not re-bootstrap it. Bring the other members back first (then remove and re-add this one), "+
		"or restore the cluster from a snapshot", e.Host, e.Host, e.ID, e.DataDir)
}

// Detect asks the members' client URLs whether a cluster is already running.
type Detect struct{ g *Group }

// Title is PhaseDetect.
func (*Detect) Title() string { return PhaseDetect }

// Run does the phase's work. Errors: the members refuse hactl's client certificate (another
// cluster's state dir?), or answer as another cluster than the state dir records.
func (ph *Detect) Run(ctx context.Context) error {
	b := ph.g
	formedBefore := b.st.ClusterID != ""
	anyData := false
	for _, f := range b.ledger.facts {
		anyData = anyData || f.Data == DataMember
	}
	if !b.creds.Ready() && b.recovery != nil {
		b.run.Printer.Infof("  not asked: the client certificate is created when bootstrap recovers the state dir (the plan assumes the members with data keep running)")
		return nil
	}
	if !b.creds.Ready() || (!formedBefore && !anyData) {
		b.run.Printer.Infof("  no running cluster: nothing has etcd data yet")
		return nil
	}
	if b.ledger.noneRunning(b.members) {
		// Nobody to ask: skip the wait for a quorum (seconds of a restore's downtime).
		b.run.Printer.Infof("  no running cluster: etcd.service runs on no member")
		return nil
	}
	endpoints := b.KnownClientURLs()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := etcd.NewClient(dctx, endpoints, b.creds.TLS, 3*time.Second, b.run.EtcdDial())
	if err != nil {
		b.run.Printer.Infof("  no running cluster reachable: %v", err)
		return nil
	}
	defer cli.Close()
	resp, err := cli.MemberList(dctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rej := ph.tlsRejection(ctx, endpoints); rej != nil {
			return fmt.Errorf("detect: the members at %s refuse hactl's client certificate (%s): is spec.stateDir "+
				"this cluster's state dir? hactl will not go on without knowing whether the cluster is running: %w (TLS handshake: %w)",
				strings.Join(endpoints, ","), b.creds.TLS.Cert, err, rej)
		}
		b.run.Printer.Infof("  no quorum reachable through %s: %v", strings.Join(endpoints, ","), err)
		return nil
	}
	l := &LiveCluster{clusterID: resp.Header.ClusterId}
	for _, m := range resp.Members {
		lm := liveMember{id: m.ID, name: m.Name, peerURLs: m.PeerURLs, learner: m.IsLearner}
		for _, u := range m.ClientURLs { // the version an upgrade is checked against (etcd.CheckUpgrade)
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cli.Status(sctx, u)
			scancel()
			if err == nil {
				lm.version = st.Version
				break
			}
		}
		l.members = append(l.members, lm)
	}
	b.live = l
	b.run.Printer.Infof("  running cluster %x with %d members", l.clusterID, len(l.members))
	if b.st.ClusterID != "" && b.st.ClusterID != fmt.Sprintf("%x", l.clusterID) {
		return fmt.Errorf("the members answer as etcd cluster %x but the state dir recorded cluster %s: the hosts were "+
			"re-bootstrapped or restored outside this state dir; refusing to continue", l.clusterID, b.st.ClusterID)
	}
	return nil
}

// tlsRejection returns the first endpoint's refusal of hactl's TLS credentials (etcd.Handshake:
// typed errors, not gRPC's flattened message), or nil when none refuses them (they are down or
// without quorum).
func (ph *Detect) tlsRejection(ctx context.Context, endpoints []string) error {
	b := ph.g
	for _, ep := range endpoints {
		err := etcd.Handshake(ctx, ep, b.creds.TLS, 2*time.Second, b.run.EtcdDial())
		if err != nil && etcd.IsTLSRejection(err) {
			return fmt.Errorf("%s: %w", ep, err)
		}
	}
	return nil
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

// Plan decides, per member, what to do, and prints it. It refuses unsafe situations (lost data dirs,
// another cluster's data) with errors naming the host and what to do: *MemberDataLostError,
// *PeerURLChangedError, or an error naming the host.
type Plan struct{ g *Group }

// Title is PhasePlan.
func (*Plan) Title() string { return PhasePlan }

// Run does the phase's work.
func (ph *Plan) Run(ctx context.Context) error {
	b := ph.g
	var errs *multierror.Error
	joinCluster := ph.liveInitialCluster()
	for _, m := range b.members {
		f := b.ledger.facts[m.Name]
		p := &HostPlan{}
		b.ledger.plans[m.Name] = p
		hasData := f.Data == DataMember
		if hasData && (f.Marker == nil || f.Marker.Token != b.st.Token) {
			other := "no hactl marker"
			if f.Marker != nil {
				other = fmt.Sprintf("cluster %q, token %s", f.Marker.Cluster, f.Marker.Token)
			}
			errs = multierror.Append(errs, fmt.Errorf("%s: data dir %s holds etcd data that is not this cluster's (%s; this cluster's token is %s): "+
				"hactl never overwrites it; move it aside (e.g. mv %s %s.old) if it is not needed",
				m.Name, b.run.Spec.Spec.Etcd.DataDir, other, b.st.Token, b.run.Spec.Spec.Etcd.DataDir, b.run.Spec.Spec.Etcd.DataDir))
			continue
		}
		if hasData && slices.Contains(b.opt.ReplaceLost, m.Name) {
			errs = multierror.Append(errs, &ReplaceLostIntactError{Host: m.Name, DataDir: b.run.Spec.Spec.Etcd.DataDir})
			continue
		}
		known := b.st.Members[m.Name] != nil && b.st.Members[m.Name].ID != "" // a member before this run
		rec := b.memberRecord(m)
		if rec.PeerURL != m.PeerURL {
			if ph.formed() || b.live != nil {
				errs = multierror.Append(errs, &PeerURLChangedError{Host: m.Name, ID: orDash(rec.ID), Old: rec.PeerURL, New: m.PeerURL})
				continue
			}
			rec.PeerURL, rec.ClientURL = m.PeerURL, m.ClientURL
		}
		if !ph.formed() && b.live == nil && rec.InitialClusterState == "new" {
			// The cluster never formed: the founding flags follow the spec (hosts or ports may have
			// been corrected since an earlier, failed run).
			rec.InitialCluster = b.FoundingCluster()
		}
		lm := b.live.byPeerURL(m.PeerURL)
		switch {
		case b.live == nil && ph.formed() && !hasData && known:
			errs = multierror.Append(errs, &MemberDataLostError{Host: m.Name, ID: orDash(rec.ID), DataDir: b.run.Spec.Spec.Etcd.DataDir})
			continue
		case b.live == nil && ph.formed() && !hasData:
			errs = multierror.Append(errs, fmt.Errorf("%s: is a new member for cluster %s, but no quorum answers at %s: a member can only "+
				"join a running cluster; bring the existing members back first (hactl status), then re-run",
				m.Name, orDash(b.st.ClusterID), strings.Join(b.KnownClientURLs(), ",")))
			continue
		case b.live == nil && !hasData:
			p.Action = report.ActionCreate
			if f.Marker != nil || f.EtcdActive == "active" || f.EtcdActive == "activating" {
				p.Action = report.ActionResume
			}
		case b.live == nil: // data present, cluster not answering: start what is stopped
			p.Action = report.ActionUnchanged
			if f.EtcdActive != "active" {
				p.Action = report.ActionStart
			}
		case lm != nil && lm.name != "" && !hasData && !slices.Contains(b.opt.ReplaceLost, m.Name):
			errs = multierror.Append(errs, &MemberDataLostError{Host: m.Name, ID: fmt.Sprintf("%x", lm.id), DataDir: b.run.Spec.Spec.Etcd.DataDir, Running: true})
			continue
		case lm != nil && lm.name != "" && !hasData: // --replace-lost: removed, then joined again under the same peer URL
			p.Action = report.ActionReplace
			p.ReplaceID = lm.id
			rec.ID = ""
			rec.InitialCluster = strings.Join(joinCluster, ",") // lists this host's peer URL once, under its name
			rec.InitialClusterState = "existing"
		case lm != nil && lm.name == "" && !hasData: // added (or founding) but never started
			p.ID = lm.id
			p.Action = report.ActionResume
			if lm.learner || rec.InitialClusterState == "existing" {
				p.Action = report.ActionJoin
				if rec.InitialClusterState != "existing" { // no record of the join (e.g. state dir restored)
					rec.InitialCluster = strings.Join(joinCluster, ",")
					rec.InitialClusterState = "existing"
				}
			}
		case lm != nil:
			p.ID = lm.id
			p.Action = report.ActionUnchanged
			if f.EtcdActive != "active" {
				p.Action = report.ActionStart
			}
			if lm.learner {
				p.Action = report.ActionJoin // promote still pending
			}
		case hasData: // not a member of the running cluster but holds our data: removed earlier
			errs = multierror.Append(errs, fmt.Errorf("%s: holds data of this cluster but is not a member of the running cluster (removed?): "+
				"move %s aside (hactl never deletes it), then re-run to add it as a new member", m.Name, b.run.Spec.Spec.Etcd.DataDir))
			continue
		default: // a new host for a running cluster
			p.Action = report.ActionJoin
			joinCluster = append(joinCluster, m.Name+"="+m.PeerURL)
			rec.InitialCluster = strings.Join(joinCluster, ",")
			rec.InitialClusterState = "existing"
		}
		if p.ID != 0 {
			rec.ID = fmt.Sprintf("%x", p.ID)
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
				p.Upload = append(p.Upload, df)
			}
		}
		p.Download = b.files.needsDownload(f)
		restartWorthy := p.Download
		for _, df := range p.Upload {
			// etcd reads neither the marker nor the CA key (kept on members for recovery only).
			if df.Path != remoteMarker && df.Path != filepath.Join(remotePKIDir, "ca.key") {
				restartWorthy = true
			}
		}
		if restartWorthy && p.Action == report.ActionUnchanged {
			p.Action = report.ActionUpdate
		}
		p.Restart = p.Action != report.ActionUnchanged && !(p.Action == report.ActionResume && f.EtcdActive == "active" && !restartWorthy)
		if p.Action == report.ActionJoin && lm != nil && lm.learner && f.EtcdActive == "active" {
			p.Restart = restartWorthy
		}
	}
	if b.live != nil && b.opt.JoinOnly == "" {
		if err := ph.checkSpares(); err != nil {
			return err
		}
		for _, lm := range b.live.members {
			if !ph.inSpec(lm) {
				b.run.Printer.Warnf("etcd member %s (ID %x, %s) is in the cluster but not in the spec; hactl leaves it alone (remove it with hactl etcd member remove %s if it is gone)",
					orDash(lm.name), lm.id, strings.Join(lm.peerURLs, ","), orDash(lm.name))
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	if err := ph.checkJoinOnly(); err != nil {
		return err
	}
	if b.live != nil {
		to := b.run.Spec.Spec.Etcd.Version
		for _, lm := range b.live.members {
			if err := etcd.CheckUpgrade(orDash(lm.name), lm.version, to); err != nil {
				return fmt.Errorf("%s: %w", PhasePlan, err)
			}
		}
		for _, m := range b.members {
			lm, p := b.live.byPeerURL(m.PeerURL), b.ledger.plans[m.Name]
			if lm != nil && lm.version != "" && lm.version != strings.TrimPrefix(to, "v") && p.Restart {
				p.From = lm.version
			}
		}
	}
	ph.printPlan()
	return nil
}

// formed reports whether the cluster formed at some point: a cluster ID was recorded, or (state
// recovered from the members, no ID yet) a member holds etcd data.
func (ph *Plan) formed() bool {
	return ph.g.st.ClusterID != "" || (ph.g.recovery != nil && ph.g.recovery.anyData)
}

// checkJoinOnly refuses a JoinOnly run (Options.JoinOnly) that would do more than add that member.
func (ph *Plan) checkJoinOnly() error {
	b := ph.g
	if b.opt.JoinOnly == "" {
		return nil
	}
	var errs *multierror.Error
	found := false
	for _, m := range b.members {
		p := b.ledger.plans[m.Name]
		if m.Name == b.opt.JoinOnly {
			found = true
			if p.Action != report.ActionJoin && p.Action != report.ActionUnchanged {
				errs = multierror.Append(errs, fmt.Errorf("%s: the plan is %s, not a join: only a host that is no member yet can be added", m.Name, p.Action))
			}
			continue
		}
		if p.Action != report.ActionUnchanged || p.Restart || p.Download || len(p.Upload) > 0 {
			var files []string
			for _, f := range p.Upload {
				files = append(files, filepath.Base(f.Path))
			}
			errs = multierror.Append(errs, fmt.Errorf("%s: would be changed too (%s; files: %s): the running cluster does not match the spec; run hactl bootstrap first, then replace",
				m.Name, p.Action, orDash(strings.Join(files, " "))))
		}
	}
	if !found {
		errs = multierror.Append(errs, fmt.Errorf("%s is not an etcd host of the spec", b.opt.JoinOnly))
	}
	if err := errs.ErrorOrNil(); err != nil {
		return fmt.Errorf("%s: adding only %s: %w", PhasePlan, b.opt.JoinOnly, err)
	}
	return nil
}

// ReplaceLostIntactError refuses --replace-lost for a member whose data dir holds its data: the
// member is not lost, and replacing it would throw a healthy copy away (exit 2).
type ReplaceLostIntactError struct {
	Host, DataDir string
}

func (e *ReplaceLostIntactError) Error() string {
	return fmt.Sprintf("%s: --replace-lost names it, but its data dir %s holds its etcd data: it is not lost; hactl replaces only a member whose data dir is gone (drop %s from --replace-lost)", e.Host, e.DataDir, e.Host)
}

// ExitCode: refused input.
func (e *ReplaceLostIntactError) ExitCode() int { return 2 }

// HealedOntoSpareError refuses to go on while a member runs on a spare of spec.etcd.spares that
// the spec does not list as an etcd host: hactl-operator moved a lost member there, and going on
// would work on the cluster the spec describes, not the one that runs (adding the lost member back,
// a fourth member). Exit 1: found on the running cluster.
type HealedOntoSpareError struct {
	Spares []string // "spare-c (ID 8e9e05c52164694d)"
}

func (e *HealedOntoSpareError) Error() string {
	return fmt.Sprintf("%s: etcd member(s) %s run on spares of spec.etcd.spares: hactl-operator replaced lost members there (kubectl -n hactl-system get etcdcluster -o yaml: status.heals). "+
		"hactl changes nothing until cluster.yaml says so: move each spare from spec.etcd.spares into the etcd hosts in place of the member it replaced, and run hactl operator adopt",
		PhasePlan, strings.Join(e.Spares, ", "))
}

// checkSpares returns a *HealedOntoSpareError when a running member not in the spec carries a
// spare's name or a peer URL on a spare's address.
func (ph *Plan) checkSpares() error {
	b := ph.g
	var found []string
	for _, lm := range b.live.members {
		if ph.inSpec(lm) {
			continue
		}
		for _, sp := range b.run.Spec.Spec.Etcd.Spares {
			onSpare := lm.name == sp.Name
			for _, u := range lm.peerURLs {
				if pu, err := url.Parse(u); err == nil && pu.Hostname() == sp.Address {
					onSpare = true
				}
			}
			if onSpare {
				found = append(found, fmt.Sprintf("%s (ID %x)", sp.Name, lm.id))
				break
			}
		}
	}
	if len(found) > 0 {
		return &HealedOntoSpareError{Spares: found}
	}
	return nil
}

func (ph *Plan) inSpec(lm liveMember) bool {
	b := ph.g
	for _, m := range b.members {
		for _, u := range lm.peerURLs {
			if u == m.PeerURL {
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
func (ph *Plan) liveInitialCluster() []string {
	b := ph.g
	if b.live == nil {
		return nil
	}
	var out []string
	for _, lm := range b.live.members {
		for _, u := range lm.peerURLs {
			name := lm.name
			for _, m := range b.members {
				if m.PeerURL == u {
					name = m.Name
				}
			}
			out = append(out, name+"="+u)
		}
	}
	return out
}

func (ph *Plan) printEffective() {
	b := ph.g
	for _, line := range effectiveDiffs(b.run.Spec.Spec.Etcd.QuotaBackendBytes, b.members, b.ledger.facts, b.ledger.plans) {
		b.run.Printer.Warnf("%s", line)
	}
}

// effectiveDiffs compares the settings the running members enforce (read back by preflight:
// Facts.Quota) with the spec, one line per member that differs, saying whether this run's restart
// applies the spec's value.
func effectiveDiffs(quota int64, members []Member, facts map[string]*Facts, plans map[string]*HostPlan) []string {
	var out []string
	for _, m := range members {
		f, p := facts[m.Name], plans[m.Name]
		if f == nil || f.Quota == 0 || f.Quota == quota {
			continue
		}
		fix := "this run does not restart it: the unit already has the spec's value, so something else sets it (a drop-in or environment file hactl does not own?)"
		if p != nil && p.Restart {
			fix = "etcd/start restarts it with the spec's value"
		}
		out = append(out, fmt.Sprintf("%s: etcd runs with quota-backend-bytes %d (read from its %s), spec.etcd.quotaBackendBytes is %d: %s",
			m.Name, f.Quota, f.QuotaFrom, quota, fix))
	}
	return out
}

func (ph *Plan) printPlan() {
	b := ph.g
	var rows [][]string
	for _, m := range b.members {
		p := b.ledger.plans[m.Name]
		what := "-"
		var parts []string
		if p.Download {
			d := b.run.Spec.Spec.Etcd.Download
			parts = append(parts, fmt.Sprintf("download %s (sha256 %s)", d.URL, ShortSum(strings.ToLower(d.SHA256))))
		}
		if len(p.Upload) > 0 {
			byNote := map[string][]string{}
			var notes []string
			for _, f := range p.Upload {
				if byNote[f.Note] == nil {
					notes = append(notes, f.Note)
				}
				byNote[f.Note] = append(byNote[f.Note], filepath.Base(f.Path))
			}
			for _, n := range notes {
				parts = append(parts, n+": "+strings.Join(byNote[n], " "))
			}
		}
		if p.From != "" {
			parts = append([]string{fmt.Sprintf("upgrade etcd v%s → %s", p.From, b.run.Spec.Spec.Etcd.Version)}, parts...)
		}
		if len(parts) > 0 {
			what = strings.Join(parts, "; ")
		}
		restart := "no"
		if p.Restart {
			restart = "yes"
		}
		rows = append(rows, []string{m.Name, m.Host.Zone, string(p.Action), restart, what})
	}
	var sb strings.Builder
	ui.Table(&sb, []string{"HOST", "ZONE", "ACTION", "START/RESTART", "FILES"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		b.run.Printer.Infof("  %s", line)
	}
	ph.printEffective()
	if b.live != nil {
		for _, m := range b.members {
			if b.rolls(m.Name) {
				b.run.Printer.Infof("  running cluster: changed members are installed and restarted one at a time, the leader last, each healthy and caught up before the next; a failure stops the roll")
				break
			}
		}
	}
}
